// What a program that mounts `allocnet agent` needs before it loads the agent (the CLI lists the
// command in its help and reads its argv for every command): importing nothing, so that
// `allocnet alloc list` does not pay for the agent (`@allocnet/agent/command-line`).

/** The `agent` command's description, as `allocnet --help` lists it. */
export const AGENT_COMMAND_DESCRIPTION =
  'run the allocnet node agent: allocation networks over gRPC on a unix socket (and TCP with TLS)';

/**
 * `-dev` (Nomad's spelling) as `--dev`: commander has no single-dash long options. The CLI's
 * entry calls this on its argv before parsing.
 */
export function normalizeAgentArgs(argv: readonly string[]): string[] {
  return argv.map((a) => (a === '-dev' ? '--dev' : a));
}
