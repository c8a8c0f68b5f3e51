import { invalidArgument } from './errors.js';

/** Container ids and network names: the spec's (and libcni's) rule. */
export const NAME_PATTERN = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

export function checkContainerId(id: string, field = 'containerId'): string {
  if (id === '') throw invalidArgument(field, 'is empty', 3);
  if (!NAME_PATTERN.test(id)) {
    throw invalidArgument(
      field,
      `${JSON.stringify(id)} has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"`,
    );
  }
  return id;
}

/** Linux keeps interface names to IFNAMSIZ - 1 = 15 bytes. */
export const MAX_IFNAME_BYTES = 15;

export function checkIfName(name: string, field = 'ifName'): string {
  if (name === '') throw invalidArgument(field, 'is empty');
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > MAX_IFNAME_BYTES) {
    throw invalidArgument(
      field,
      `${JSON.stringify(name)} is ${bytes} bytes; interface names have at most ${MAX_IFNAME_BYTES}`,
    );
  }
  if (name === '.' || name === '..')
    throw invalidArgument(field, `${JSON.stringify(name)} is not an interface name`);
  if (/[/:\s]/u.test(name))
    throw invalidArgument(field, `${JSON.stringify(name)} contains "/", ":" or whitespace`);
  return name;
}

/** CNI_ARGS pairs, in order. */
export type CniArgs = readonly (readonly [string, string])[];

/**
 * Checks `CNI_ARGS` pairs: keys non-empty, and no `;` or `=` in a key or value (plugins split on
 * both, with no escaping).
 */
export function checkArgs(args: CniArgs, field = 'args'): CniArgs {
  args.forEach(([key, value], i) => {
    if (key === '') throw invalidArgument([field, i], 'has an empty key');
    for (const [what, text] of [
      ['key', key],
      ['value', value],
    ] as const) {
      if (/[;=]/.test(text)) {
        throw invalidArgument([field, i], `${what} ${JSON.stringify(text)} contains ";" or "="`);
      }
      if (text.includes('\0'))
        throw invalidArgument([field, i], `${what} contains a NUL character`);
    }
  });
  return args;
}

/**
 * `CNI_ARGS` text: `IgnoreUnknown=1` first whenever any pair is passed (so plugins skip keys they do
 * not know), then the pairs as `k=v` joined by `;`. A pair the caller gives for `IgnoreUnknown`
 * replaces the default.
 */
export function formatArgs(args: CniArgs): string {
  if (args.length === 0) return '';
  const ignore = args.some(([k]) => k === 'IgnoreUnknown') ? [] : [['IgnoreUnknown', '1'] as const];
  return [...ignore, ...args].map(([k, v]) => `${k}=${v}`).join(';');
}

/** Reads `K=V;K2=V2` (the CLI's `--args`) into pairs, refusing what `checkArgs` refuses. */
export function parseArgs(text: string, field = 'args'): CniArgs {
  if (text.trim() === '') return [];
  const pairs = text.split(';').map((part, i) => {
    const eq = part.indexOf('=');
    if (eq < 0) throw invalidArgument([field, i], `${JSON.stringify(part)} is not K=V`);
    return [part.slice(0, eq), part.slice(eq + 1)] as const;
  });
  return checkArgs(pairs, field);
}
