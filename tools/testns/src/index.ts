export { createNetnsLab, requireNetworkTestHost, withNetnsLab } from './lab.js';
export { comparableRuleset } from './ruleset.js';
export type {
  ClientOptions,
  ExecOptions,
  ExecResult,
  NetnsLab,
  TestClient,
  TestNetns,
} from './lab.js';
export { NAME_ROOT, namespaceName, runPrefix } from './names.js';
// Where it has always been importable from; it lives with the namespace manager now.
export { parseLinkNames } from '@allocnet/netns';
export { echo, startEchoServer } from './echo.js';
export type { EchoServer } from './echo.js';
export { residentMiB, startNodeAgent } from './agent.js';
export type { NodeAgent, NodeAgentExit, NodeAgentOptions } from './agent.js';
export { seeded } from './random.js';
