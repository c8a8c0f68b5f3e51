// Fakes for tests of the CNI door and of what wires it: a logger that records every line, and a
// runner of records a test makes (several attachments with their CNI results).
import type { CniLogger } from '../seams.js';

export interface LoggedLine {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly message: string;
  readonly meta: Record<string, unknown> | undefined;
}

/** A logger that keeps every line, in order. */
export function createRecordingLogger(): CniLogger & { readonly lines: LoggedLine[] } {
  const lines: LoggedLine[] = [];
  const at = (level: LoggedLine['level']) => (message: string, meta?: Record<string, unknown>) => {
    lines.push({ level, message, meta });
  };
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}
export { createFakeCniRunner, readyRecordOf } from './runner.js';
export type { FakeCniRunner, FakeRunnerCall } from './runner.js';
