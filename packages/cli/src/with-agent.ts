// A call to the agent from a command's action. The contract's client (node:http2 and protobufjs,
// @allocnet/proto/call) is a large part of a short command's start (docs/cli.md), so it is loaded
// here, when a call is made, and not when the agent cannot be reached: a unix socket that refuses
// a connect(2) now would refuse the call's too, and the answer is the same `unreachableError` a
// failed call gets.
import type { AgentConnection } from './agent-client.js';
import { connectionSettings } from './connect-options.js';
import type { ConnectOptions } from './connect-options.js';
import { isCliError, unreachableError } from './errors.js';

/**
 * Runs `fn` with a connection, turning a failed call into one line and closing the clients. Bad
 * flags are usage errors before anything connects.
 */
export async function withAgent<T>(
  options: ConnectOptions,
  fn: (agent: AgentConnection) => Promise<T>,
): Promise<T> {
  const settings = connectionSettings(options);
  // Only a unix socket: it answers at once, where a TCP address may take the probe's timeout.
  if (settings.target.startsWith('unix:')) {
    // node:net too is loaded here, not by `--help`
    const { probeConnect } = await import('./connect-probe.js');
    const refused = await probeConnect(settings.target);
    if (refused !== undefined) throw unreachableError(settings.address, refused);
  }
  const { callError, connect } = await import('./agent-client.js');
  const agent = connect(settings);
  try {
    return await fn(agent);
  } catch (error) {
    if (isCliError(error)) throw error;
    throw await callError(agent, error);
  } finally {
    agent.close();
  }
}
