// Agent addresses as users write them, as grpc targets: no grpc here, so that a program can check
// an address (and say what is wrong with it) before it loads grpc-js (`@allocnet/proto/target`).
import { ProtoError } from './errors.js';

export { ProtoError, isProtoError } from './errors.js';

const HOST_PORT = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):([0-9]{1,5})$/;

/**
 * The grpc target for an agent address as users write it:
 * - a socket path: `/run/allocnet/agent.sock` → `unix:///run/allocnet/agent.sock`,
 *   `./agent.sock` → `unix:./agent.sock` (relative to the working directory);
 * - a unix target, kept: `unix:///abs`, `unix:/abs`, `unix:relative`;
 * - `host:port` or `[v6]:port`, kept (grpc resolves the name).
 * Anything else throws a `ProtoError` (`invalid-target`).
 */
export function agentTarget(address: string): string {
  const refuse = (why: string): never => {
    throw new ProtoError(
      'invalid-target',
      `agent address ${JSON.stringify(address)} ${why}; use a socket path (/… or ./…), unix:<path> or host:port`,
    );
  };
  if (address === '') return refuse('is empty');
  if (/\s/.test(address)) return refuse('contains whitespace');
  if (address.startsWith('/')) return `unix://${address}`;
  if (address.startsWith('./') || address.startsWith('../')) return `unix:${address}`;
  if (address.startsWith('unix:')) {
    const rest = address.slice('unix:'.length);
    // after `unix://` comes an absolute path: in `unix://x`, `x` would be an authority
    const slashes = rest.startsWith('//');
    const socketPath = slashes ? rest.slice(2) : rest;
    if (socketPath === '' || socketPath === '/' || (slashes && !socketPath.startsWith('/')))
      return refuse('has no socket path after "unix:"');
    return address;
  }
  const port = HOST_PORT.exec(address)?.[1];
  if (port === undefined) return refuse('is not a socket path or host:port');
  if (Number(port) < 1 || Number(port) > 65535) return refuse(`has port ${port}, not 1-65535`);
  return address;
}
