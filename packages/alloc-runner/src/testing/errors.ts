import { isRunnerError } from '../errors.js';
import type { RunnerError } from '../errors.js';

/**
 * The RunnerError `promise` rejects with; anything else it rejects with is thrown again, and a
 * promise that resolves fails the test ("it did not fail").
 */
export async function runnerRejection(promise: Promise<unknown>): Promise<RunnerError> {
  try {
    await promise;
  } catch (error) {
    if (isRunnerError(error)) return error;
    throw error;
  }
  throw new Error('it did not fail');
}
