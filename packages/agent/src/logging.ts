// The only place that makes winston transports: the agent logs JSON lines (or, for a terminal,
// readable lines) to one stream, stderr by default; the libraries get adapters of it.
import { Writable } from 'node:stream';
import winston from 'winston';
import type { Logger } from '@allocnet/base';
import type { LogFormat, LogLevel } from './config.js';

/**
 * What the agent logs through: the libraries' `Logger` (@allocnet/base) with all four levels —
 * a winston logger or anything with the same four methods.
 */
export interface AgentLogger extends Required<Logger> {
  /** winston's: changes the level live (SIGHUP). Absent on loggers that cannot. */
  level?: string;
  /** winston's: whether a level would be written. Absent: every level is. */
  isLevelEnabled?(level: string): boolean;
}

export interface AgentLoggerOptions {
  readonly level: LogLevel;
  readonly format: LogFormat;
  /** Where lines go. Default process.stderr. */
  readonly stream?: { write(text: string): unknown };
}

/** `key=value` pairs, values quoted when they need it, for the text format. */
function pairs(meta: Record<string, unknown>): string {
  return Object.entries(meta)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => {
      const text = typeof v === 'string' ? v : JSON.stringify(v);
      return `${k}=${/^[^\s"=]+$/.test(text) ? text : JSON.stringify(text)}`;
    })
    .join(' ');
}

const textFormat = winston.format.printf((info) => {
  const { level, message, timestamp, ...meta } = info;
  const rest = pairs(meta);
  return `${String(timestamp)} ${level.toUpperCase().padEnd(5)} ${String(message)}${rest === '' ? '' : ` ${rest}`}`;
});

/** A Writable over anything with `write(text)` (winston wants a stream; the CLI's io has less). */
function lineStream(target: { write(text: string): unknown }): Writable {
  return new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      target.write(chunk.toString());
      callback();
    },
  });
}

/** The agent's logger: one line per event, `{timestamp, level, message, …fields}` as JSON or text. */
export function createAgentLogger(options: AgentLoggerOptions): winston.Logger {
  return winston.createLogger({
    level: options.level,
    format: winston.format.combine(
      winston.format.timestamp(),
      options.format === 'json' ? winston.format.json() : textFormat,
    ),
    transports: [
      // winston declares its transports as interfaces with a `new` member, which this rule
      // cannot relate to the TransportStream class they extend; the instance is a real one.
      // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment
      new winston.transports.Stream({ stream: lineStream(options.stream ?? process.stderr) }),
    ],
  });
}

/** The libraries' logger (`debug`, `warn`, `info`, `error`), each line tagged with its component. */
export function componentLogger(logger: AgentLogger, component: string): Required<Logger> {
  return {
    debug: (message, meta) => {
      // winston runs its formats (timestamp, JSON) before its transports drop a line below the
      // level: the CNI runtime's and iptables' per-process debug lines would pay for a timestamp
      // each, which a CPU profile of concurrent setups showed to be a large share of their cost.
      if (logger.isLevelEnabled?.('debug') === false) return;
      logger.debug(message, { component, ...meta });
    },
    warn: (message, meta) => {
      logger.warn(message, { component, ...meta });
    },
    info: (message, meta) => {
      logger.info(message, { component, ...meta });
    },
    error: (message, meta) => {
      logger.error(message, { component, ...meta });
    },
  };
}

/** A logger that drops everything (tests, and library use without a logger). */
export const silentAgentLogger: AgentLogger = {
  error() {
    // Silent by design.
  },
  warn() {
    // Silent by design.
  },
  info() {
    // Silent by design.
  },
  debug() {
    // Silent by design.
  },
};
