// The one place where allocnet says what a network namespace's name and a file path may be: the
// runner's namespace names, iptables-node's `netns` option, the CNI runtime's plugin namespace,
// the agent's and the configurator's paths all ask here. Pure: no I/O. Each function gives the
// problem as text without the value (`is not an absolute path`), so that each caller words it
// in its own error with its own field, `${show(value)} ${problem}`.

/** Where `ip netns` keeps its namespaces (iproute2's NETNS_RUN_DIR). */
export const NETNS_RUN_DIR = '/run/netns';

/** PATH_MAX, the longest path the kernel takes, its terminating NUL included. */
export const MAX_PATH_LENGTH = 4096;

// Names `ip netns` accepts, that stay one path component and that no command reads as an option.
const NETNS_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$/;

/** What is wrong with `name` as a namespace name, or undefined when nothing is. */
export function netnsNameProblem(name: string): string | undefined {
  return NETNS_NAME.test(name)
    ? undefined
    : 'is not 1 to 255 of [A-Za-z0-9_.-] starting with a letter, a digit or "_"';
}

/** What is wrong with `path` as a clean absolute path, or undefined when nothing is. */
export function absolutePathProblem(path: string): string | undefined {
  if (!path.startsWith('/')) return 'is not an absolute path';
  if (
    path.length >= MAX_PATH_LENGTH ||
    path.includes('\0') ||
    path.split('/').some((segment) => segment === '.' || segment === '..')
  )
    return `is not a clean absolute path (no "." or ".." segment, no NUL, under ${MAX_PATH_LENGTH} characters)`;
  return undefined;
}

/** A clean absolute path without repeated or trailing slashes (`/var//lib/x/` → `/var/lib/x`). */
export function tidyPath(path: string): string {
  const tidy = path.replace(/\/{2,}/g, '/');
  return tidy.length > 1 && tidy.endsWith('/') ? tidy.slice(0, -1) : tidy;
}

/** The path of the namespace named `name` (checked by the caller). */
export function netnsPathOf(name: string): string {
  return `${NETNS_RUN_DIR}/${name}`;
}

/**
 * A namespace given by name or by path: a bare name means `${NETNS_RUN_DIR}/<name>`; a path is
 * taken as is. `name` is set when it is one under NETNS_RUN_DIR (what `ip netns exec` needs). A
 * problem instead when it is neither a namespace name nor a clean absolute path.
 */
export function resolveNetns(
  nameOrPath: string,
): { readonly path: string; readonly name: string | undefined } | { readonly problem: string } {
  if (!nameOrPath.includes('/')) {
    const problem = netnsNameProblem(nameOrPath);
    return problem === undefined
      ? { path: netnsPathOf(nameOrPath), name: nameOrPath }
      : { problem };
  }
  const problem = absolutePathProblem(nameOrPath);
  if (problem !== undefined) return { problem };
  const prefix = `${NETNS_RUN_DIR}/`;
  const rest = nameOrPath.startsWith(prefix) ? nameOrPath.slice(prefix.length) : undefined;
  return {
    path: nameOrPath,
    name: rest !== undefined && netnsNameProblem(rest) === undefined ? rest : undefined,
  };
}
