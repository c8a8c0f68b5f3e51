import { NetnsError } from './errors.js';
import { netnsNameProblem } from './paths.js';

/** A namespace name iproute2 accepts, also as a path component; throws `invalid-name`. */
export function checkNetnsName(name: string): string {
  const problem = netnsNameProblem(name);
  if (problem !== undefined)
    throw new NetnsError(`namespace name ${JSON.stringify(name)} ${problem}`, {
      code: 'invalid-name',
    });
  return name;
}

/** `ip netns list` output (`name` or `name (id: 3)`, one a line) as names. */
export function parseNetnsList(output: string): string[] {
  return output
    .split('\n')
    .map((line) => line.trim().split(/\s+/)[0] ?? '')
    .filter((name) => name !== '');
}

/** Link names as `ip -o link show` prints them (`2: veth0@if3: <…>`), without the `@peer` part. */
export function parseLinkNames(output: string): string[] {
  return output
    .split('\n')
    .map((line) => /^\d+:\s+([^:@\s]+)/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined);
}

/** `ip netns pids` output (one pid a line) as numbers. */
export function parsePids(output: string): number[] {
  return output
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => /^[0-9]+$/.test(line))
    .map(Number);
}
