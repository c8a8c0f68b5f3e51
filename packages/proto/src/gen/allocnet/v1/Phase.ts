// Original file: ../../proto/allocnet/v1/types.proto

/**
 * Where an allocation's network is in its lifecycle.
 */
export const Phase = {
  /**
   * Not set; the agent never reports it.
   */
  PHASE_UNSPECIFIED: 'PHASE_UNSPECIFIED',
  /**
   * A setup is running: the intent is recorded and CNI ADD attempts are under way.
   */
  PHASE_SETTING_UP: 'PHASE_SETTING_UP',
  /**
   * The network is set up and its address is known.
   */
  PHASE_READY: 'PHASE_READY',
  /**
   * A teardown is running: CNI DEL and the cleanup of what the plugins left.
   */
  PHASE_TEARING_DOWN: 'PHASE_TEARING_DOWN',
  /**
   * The setup failed after every attempt; `error` says why.
   */
  PHASE_FAILED: 'PHASE_FAILED',
  /**
   * The agent has just started and has not yet settled this allocation's record (CHECKed it, or
   * finished what a crash interrupted); the other fields are as last recorded. An operation on it
   * waits until that is done.
   */
  PHASE_RESTORING: 'PHASE_RESTORING',
} as const;

/**
 * Where an allocation's network is in its lifecycle.
 */
export type Phase =
  /**
   * Not set; the agent never reports it.
   */
  | 'PHASE_UNSPECIFIED'
  | 0
  /**
   * A setup is running: the intent is recorded and CNI ADD attempts are under way.
   */
  | 'PHASE_SETTING_UP'
  | 1
  /**
   * The network is set up and its address is known.
   */
  | 'PHASE_READY'
  | 2
  /**
   * A teardown is running: CNI DEL and the cleanup of what the plugins left.
   */
  | 'PHASE_TEARING_DOWN'
  | 3
  /**
   * The setup failed after every attempt; `error` says why.
   */
  | 'PHASE_FAILED'
  | 4
  /**
   * The agent has just started and has not yet settled this allocation's record (CHECKed it, or
   * finished what a crash interrupted); the other fields are as last recorded. An operation on it
   * waits until that is done.
   */
  | 'PHASE_RESTORING'
  | 5;

/**
 * Where an allocation's network is in its lifecycle.
 */
export type Phase__Output = (typeof Phase)[keyof typeof Phase];
