// What the configurator finds on the node and removes (the teardown audit, forced cleanup, leak
// search and reap): found rules, chains and reservations, the reports, and the fence a reap keeps
// with the operations running beside it. Re-exported by types.ts.
import type { Family } from '@allocnet/iptables-node';

/** One iptables rule as found, in iptables-save form (`-A CHAIN …`). */
export interface FoundRule {
  readonly family: Family;
  readonly table: string;
  readonly chain: string;
  /** `-A <chain> <spec>` with iptables-save quoting. */
  readonly line: string;
}

export interface FoundChain {
  readonly family: Family;
  readonly table: string;
  readonly chain: string;
}

/** A host-local reservation file. */
export interface FoundReservation {
  readonly network: string;
  readonly address: string;
  readonly path: string;
  readonly allocId: string;
  /** allocnet's own hold (ipam.ts), not host-local's reservation. */
  readonly hold: boolean;
}

/** State tagged with an allocation (or, for `orphans`, with no one). */
export interface HostState {
  readonly rules: readonly FoundRule[];
  readonly chains: readonly FoundChain[];
  readonly reservations: readonly FoundReservation[];
  /** libcni cache files (results and ADD markers). */
  readonly cacheFiles: readonly string[];
}

export interface CleanupReport {
  readonly allocId: string;
  readonly dryRun: boolean;
  /** What was removed, or with `dryRun`, what would be. */
  readonly removed: HostState;
}

/** One allocation id with state on this host, outside the known set. */
export interface Leak {
  readonly allocId: string;
  readonly networks: readonly string[];
  readonly state: HostState;
}

export interface LeakReport {
  readonly leaks: readonly Leak[];
  /**
   * State that belongs to no allocation: firewall accept rules for addresses of a managed network
   * that no reservation holds, CNI chains nothing jumps to.
   */
  readonly orphans: HostState;
}

export interface ReapProgress {
  readonly done: number;
  readonly total: number;
  readonly allocId: string | undefined;
}

export interface ReapReport {
  readonly reaped: readonly Leak[];
  readonly orphans: HostState;
  /** Allocation ids whose state could not be removed, with the reason. */
  readonly failed: readonly { readonly allocId: string; readonly error: string }[];
}

/**
 * How a reap keeps clear of the operations that run while it does (the runner's reap guard gives
 * one; without one, nothing is spared and nothing waits). A reap scans, plans, then removes batch
 * by batch, and asks the fence at two points:
 * - when it has planned, it `take`s the leaked ids it means to remove: those already `spared`
 *   stay; from then on an operation on a taken id waits until the reap calls `done` for its batch;
 * - before the orphans (state no id can be read from), `takeOrphans`: undefined when an
 *   operation ran during the reap (the orphans stay for the next pass), else the reap holds every
 *   operation until it calls the release it is given.
 */
export interface ReapFence {
  /**
   * Ids outside `known` with an operation begun during the reap: alive, their state (old or new)
   * never removed by it. Live: it grows while the reap runs; read it when planning.
   */
  readonly spared: ReadonlySet<string>;
  /** Takes planned ids for removal: resolves those not spared, which are the reap's from now. */
  take(allocIds: readonly string[]): readonly string[];
  /** The taken ids' batch is done (removed, or failed): operations on them may go on. */
  done(allocIds: readonly string[]): void;
  /** The orphans' turn: its release, or undefined when they are to stay for the next pass. */
  takeOrphans(): (() => void) | undefined;
}
