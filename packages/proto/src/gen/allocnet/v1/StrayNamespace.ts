// Original file: ../../proto/allocnet/v1/operator_service.proto

/**
 * A network namespace named `<netns_prefix><alloc id>` (the agent's `netnsPrefix`) that no
 * allocation has: left by a lost data dir, or made by hand. An allocation's own namespace, one
 * given to an allocation by path, and one whose allocation has an operation queued or running
 * are never stray.
 */
export interface StrayNamespace {
  /**
   * The namespace's name, e.g. `alloc-6b235529-8111-4bbe-520b-d639b1d2a94e`.
   */
  name?: string;
  /**
   * Its path, e.g. `/run/netns/alloc-6b235529-8111-4bbe-520b-d639b1d2a94e`.
   */
  path?: string;
  /**
   * The allocation id its name encodes; the agent has no allocation with it.
   */
  allocId?: string;
  /**
   * Why it is a leak, for people: `named like this agent's allocations (prefix "alloc-") but no
   * allocation has it`.
   */
  reason?: string;
}

/**
 * A network namespace named `<netns_prefix><alloc id>` (the agent's `netnsPrefix`) that no
 * allocation has: left by a lost data dir, or made by hand. An allocation's own namespace, one
 * given to an allocation by path, and one whose allocation has an operation queued or running
 * are never stray.
 */
export interface StrayNamespace__Output {
  /**
   * The namespace's name, e.g. `alloc-6b235529-8111-4bbe-520b-d639b1d2a94e`.
   */
  name: string;
  /**
   * Its path, e.g. `/run/netns/alloc-6b235529-8111-4bbe-520b-d639b1d2a94e`.
   */
  path: string;
  /**
   * The allocation id its name encodes; the agent has no allocation with it.
   */
  allocId: string;
  /**
   * Why it is a leak, for people: `named like this agent's allocations (prefix "alloc-") but no
   * allocation has it`.
   */
  reason: string;
}
