/**
 * What every allocnet library logs through; a winston logger fits it. `info` and `error` are
 * optional: a library that has them to say sends them to `debug` and `warn` where the logger has
 * no such level (see `logInfo`).
 */
export interface Logger {
  debug(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  info?(message: string, meta?: Record<string, unknown>): void;
  error?(message: string, meta?: Record<string, unknown>): void;
}

export const silentLogger: Logger = {
  debug() {
    // Silent by design: the default when the caller passes no logger.
  },
  warn() {
    // Silent by design: the default when the caller passes no logger.
  },
};

/** `info` where the logger has it, `debug` otherwise. */
export function logInfo(log: Logger, message: string, meta?: Record<string, unknown>): void {
  if (log.info !== undefined) log.info(message, meta);
  else log.debug(message, meta);
}
