/** A usage error: bad flags or arguments; the command exits 2 and runs nothing. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * The command said what it had to say and fails with `status` (e.g. `alloc check` of a broken
 * allocation, `fleet` with an unreachable node); the message, if any, goes to stderr.
 */
export class ExitStatus extends Error {
  constructor(
    readonly status: number,
    message = '',
  ) {
    super(message);
    this.name = 'ExitStatus';
  }
}
