// Reload (SIGHUP, ReloadConfig): the CNI configs again, and what can change live — the log level
// and the operator token. Other keys that changed are reported as needing a restart.
//
// Concurrency: everything here runs on the event loop. A reload replaces the token in
// `OperatorToken` at once; the TCP listener's interceptor reads it for each call, so a call sees
// the old token or the new one. Two reloads at once each read the configuration and the token.
import type { CniConfigurator, NetworkCatalog } from '@allocnet/cni-configurator';
import type { AgentConfig } from './config.js';
import { messageOf } from './errors.js';
import type { AgentLogger } from './logging.js';
import { readOperatorToken } from './secrets.js';

export interface ReloadReport {
  readonly catalog: NetworkCatalog;
  /** Keys whose new values took effect. */
  readonly applied: readonly string[];
  /** Keys that changed but need a restart to take effect. */
  readonly needRestart: readonly string[];
}

/** The operator token in force: read at start, replaced by a reload, read by each TCP call. */
export interface OperatorToken {
  current: string | undefined;
}

export interface ReloaderOptions {
  /** The configuration the agent started with. */
  readonly config: AgentConfig;
  readonly logger: AgentLogger;
  readonly configurator: Pick<CniConfigurator, 'reload'>;
  readonly token: OperatorToken;
  /** Reads the configuration again; without it, only the CNI configs and the token file are. */
  readonly reloadConfig?: () => Promise<AgentConfig>;
}

/** Keys (dotted) whose values differ between two configurations. */
function changedKeys(a: unknown, b: unknown, at = ''): string[] {
  const isMap = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v);
  if (isMap(a) && isMap(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return keys.flatMap((k) => changedKeys(a[k], b[k], at === '' ? k : `${at}.${k}`));
  }
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [at];
}

/** The agent's reload. */
export function createReloader(options: ReloaderOptions): () => Promise<ReloadReport> {
  const { config, logger, configurator, token } = options;
  // What is running: the start's configuration with the changes that applied live.
  const readConfig = { current: config };
  return async () => {
    const applied: string[] = [];
    let needRestart: string[] = [];
    let next: AgentConfig | undefined;
    if (options.reloadConfig !== undefined) {
      try {
        next = await options.reloadConfig();
      } catch (error) {
        logger.error('the configuration could not be read again; keeping the one running', {
          error: messageOf(error),
        });
      }
    }
    if (next !== undefined) {
      const changed = changedKeys(readConfig.current, next);
      if (changed.includes('log.level') && logger.level !== undefined) {
        logger.level = next.log.level;
        applied.push('log.level');
      }
      needRestart = changed.filter((k) => k !== 'log.level' && k !== 'tcp.operatorTokenFile');
      readConfig.current = {
        ...readConfig.current,
        log: { ...readConfig.current.log, level: next.log.level },
      };
    }
    const tokenFile =
      next?.tcp === undefined ? config.tcp?.operatorTokenFile : next.tcp.operatorTokenFile;
    if (config.tcp !== undefined) {
      try {
        const before = token.current;
        token.current = tokenFile === undefined ? undefined : await readOperatorToken(tokenFile);
        if (before !== token.current) applied.push('tcp.operatorTokenFile');
      } catch (error) {
        // Fail closed: a token that cannot be read any more is revoked.
        token.current = undefined;
        applied.push('tcp.operatorTokenFile');
        logger.error(
          'the operator token could not be read again; bearer tokens are refused until it can',
          {
            error: messageOf(error),
          },
        );
      }
    }
    const catalog = await configurator.reload();
    logger.info('reloaded', {
      networks: catalog.networks.map((n) => n.name),
      invalidFiles: catalog.invalid.length,
      applied,
      needRestart,
    });
    if (needRestart.length > 0)
      logger.warn('these settings changed and take effect only after a restart', {
        keys: needRestart,
      });
    return { catalog, applied, needRestart };
  };
}
