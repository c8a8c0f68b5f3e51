// The configurator's view of one family's iptables (`CniConfiguratorOptions.iptables`), apart
// from types.ts to keep that one short.
import type { Iptables } from '@allocnet/iptables-node';

/**
 * What the configurator uses of one family's iptables: members of
 * `@allocnet/iptables-node`'s `Iptables`, typed as there, so `createIptables()` is one and a test
 * fake needs only these. Changes are `restore` batches, but for the host prerequisites' fallback.
 */
export interface IptablesState {
  readonly family: Iptables['family'];
  /**
   * The namespace it acts in (undefined: this process's); the setup's sysctls and conntrack go
   * there too (node.ts). A fake without it stands for this process's namespace.
   */
  readonly netns?: Iptables['netns'];
  /** The sweep's scan and the host prerequisites (with `lines`, only lines kept are parsed). */
  readonly save: Iptables['save'];
  /**
   * The sweep's removals (each table all or nothing: `perTable`) and the host prerequisites (one
   * batch, all or nothing).
   */
  readonly restore: Iptables['restore'];
  /** CHECK and the teardown audit read single chains (`not-found`: no such chain). */
  readonly listRules: Iptables['listRules'];
  /** The teardown audit's cheap questions. */
  readonly chainExists: Iptables['chainExists'];
  /** Host prerequisites, piece by piece, when their batch lost a race (host.ts). */
  readonly ruleExists: Iptables['ruleExists'];
  readonly newChain: Iptables['newChain'];
  readonly append: Iptables['append'];
  /** A leak reap's scan (`readAt`, else `saveAt`) and removal by rule handle (sweep.ts). */
  readonly readAt?: Iptables['readAt'];
  readonly saveAt?: Iptables['saveAt'];
  readonly removeAt?: Iptables['removeAt'];
  /** The agent's warm-up of the reap path (warm.ts): the removal built, never sent. */
  readonly warmRemoval?: Iptables['warmRemoval'];
  /** Which rules a setup's write finds there (native-add.ts); without it, all are new. */
  readonly searchRules?: Iptables['searchRules'];
  /** A setup's write, so that the next setup's search need not read the chains again. */
  readonly writeKeepingSearches?: Iptables['writeKeepingSearches'];
  /** A teardown's removals of its chains with their jumps and of its accepts (native-del.ts). */
  readonly removeJumped?: Iptables['removeJumped'];
  readonly removeAccepts?: Iptables['removeAccepts'];
}
