// Original file: ../../proto/allocnet/v1/operator_service.proto

import type {
  ReapStep as _allocnet_v1_ReapStep,
  ReapStep__Output as _allocnet_v1_ReapStep__Output,
} from '../../allocnet/v1/ReapStep.js';
import type {
  ReapSummary as _allocnet_v1_ReapSummary,
  ReapSummary__Output as _allocnet_v1_ReapSummary__Output,
} from '../../allocnet/v1/ReapSummary.js';

/**
 * One message of the ReapLeaks stream: progress steps, then one summary as the last message.
 */
export interface ReapLeaksProgress {
  /**
   * One leaked allocation handled.
   */
  step?: _allocnet_v1_ReapStep | null;
  /**
   * Everything that was done; always the last message.
   */
  summary?: _allocnet_v1_ReapSummary | null;
  /**
   * Which kind of message this is.
   */
  event?: 'step' | 'summary';
}

/**
 * One message of the ReapLeaks stream: progress steps, then one summary as the last message.
 */
export interface ReapLeaksProgress__Output {
  /**
   * One leaked allocation handled.
   */
  step?: _allocnet_v1_ReapStep__Output | null;
  /**
   * Everything that was done; always the last message.
   */
  summary?: _allocnet_v1_ReapSummary__Output | null;
  /**
   * Which kind of message this is.
   */
  event?: 'step' | 'summary';
}
