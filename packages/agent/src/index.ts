export { loadAgentConfig, checkAgentConfig } from './config.js';
export type {
  AgentConfig,
  AgentFlags,
  CniSettings,
  DefaultNetworkConfig,
  LoadAgentConfigOptions,
  LogFormat,
  LogLevel,
  ReconcileMode,
  TcpConfig,
  TlsConfig,
} from './config.js';
export { CONFIG_ENV, ENV_SETTINGS } from './settings.js';
export type { EnvSetting } from './settings.js';
export { DEFAULTS } from './defaults.js';
export { startAgent, agentVersion } from './agent.js';
export type { ReadyInfo, RunningAgent, StartAgentOptions } from './agent.js';
export type { ReloadReport } from './reload.js';
export { readOperatorToken } from './secrets.js';
export { agentCommand, runAgentCli } from './command.js';
export { AGENT_COMMAND_DESCRIPTION, normalizeAgentArgs } from './command-line.js';
export type {
  AgentCommandOptions,
  AgentIo,
  AgentSignal,
  DevSandboxRequest,
  DevSandbox,
  SignalSource,
} from './command.js';
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
export { createNotifier, listenForNotifications, serviceManager, statusText } from './notify.js';
export type { NotifyListener, Notifier, RestoreProgress, ServiceManager } from './notify.js';
