export { loadAgentConfig, checkAgentConfig, CONFIG_ENV, DEFAULTS, ENV_SETTINGS } from './config.js';
export type {
  AgentConfig,
  AgentFlags,
  CniSettings,
  DefaultNetworkConfig,
  EnvSetting,
  LoadAgentConfigOptions,
  LogFormat,
  LogLevel,
  ReconcileMode,
  TcpConfig,
  TlsConfig,
} from './config.js';
export { startAgent, agentVersion, readOperatorToken } from './agent.js';
export type { ReadyInfo, ReloadReport, RunningAgent, StartAgentOptions } from './agent.js';
export { agentCommand, normalizeAgentArgs, runAgentCli } from './command.js';
export type { AgentIo, AgentSignal, SignalSource } from './command.js';
export { runDevAgent } from './dev.js';
export type { DevOptions } from './dev.js';
export { AgentError, isAgentError } from './errors.js';
export type { AgentErrorCode, AgentErrorDetails } from './errors.js';
export { grpcFailure, protoField } from './status.js';
export type { AbortCause, GrpcFailure } from './status.js';
export { authorize, decide, identify, tokensEqual } from './auth.js';
export type { CallCredentials, Decision, Identity, PeerAuthContext, Role } from './auth.js';
export { createAgentMetrics, timedPluginExec } from './metrics.js';
export type { AgentMetrics, AgentMetricsOptions } from './metrics.js';
export { createAgentLogger, componentLogger } from './logging.js';
export type { AgentLogger, AgentLoggerOptions } from './logging.js';
export { bindUnixSocket, claimSocketPath, probeSocket } from './socket.js';
export type { BoundSocket, SocketState } from './socket.js';
