export { createNetnsLab, requireNetworkTestHost, withNetnsLab } from './lab.js';
export type { ExecOptions, ExecResult, NetnsLab, TestNetns } from './lab.js';
export { NAME_ROOT, namespaceName, parseLinkNames, runPrefix } from './names.js';
export { echo, startEchoServer } from './echo.js';
export type { EchoServer } from './echo.js';
