import { messageOf } from './errors.js';
import type { AgentLogger } from './logging.js';

/** Where a start registers each part it opened, with how to close it. */
export interface OpenedParts {
  push(what: string, close: () => Promise<void>): void;
}

/**
 * The parts a start has opened so far. When a later step fails, `closeAll` closes them newest
 * first (a listener before the runner it serves) and logs, without throwing, what did not close:
 * the start's own error is the one to report.
 */
export function createOpenedParts(): OpenedParts & {
  closeAll(logger: AgentLogger): Promise<void>;
} {
  const opened: { what: string; close: () => Promise<void> }[] = [];
  return {
    push(what, close) {
      opened.push({ what, close });
    },
    async closeAll(logger) {
      for (const item of opened.reverse()) {
        try {
          await item.close();
        } catch (closeError) {
          logger.warn(`closing the ${item.what} after a failed start failed`, {
            error: messageOf(closeError),
          });
        }
      }
      opened.length = 0;
    },
  };
}
