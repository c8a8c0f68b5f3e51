/** What this package logs through; a winston logger fits it. */
export interface Logger {
  debug(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
}

export const silentLogger: Logger = {
  debug() {
    // Silent by design: the default when the caller passes no logger.
  },
  warn() {
    // Silent by design: the default when the caller passes no logger.
  },
};
