export { createIptables } from './iptables.js';
export type {
  Iptables,
  IptablesOptions,
  AcceptRemoval,
  AcceptsRemoved,
  JumpedChain,
  PlacedRemoval,
  PlacedRule,
  RuleHandles,
  RuleSearch,
  RuleSearchResult,
  SaveAtOptions,
  SavedAt,
  ChainRef,
  OpaqueRule,
  ReadAt,
  ReadAtOptions,
} from './iptables.js';
export { openNftLink } from './nft.js';
export {
  NETLINK_ROUTE,
  NLMSG_DONE,
  NLMSG_ERROR,
  NLM_F_ACK,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  netlinkAttributes,
  openNetlinkSocket,
} from './netlink.js';
export type { NetlinkAttribute, NetlinkSocket, SocketKind } from './netlink.js';
export { deleteConntrackByDestinationPort } from './conntrack.js';
export type { ChainMessage, NftLink, NftLinkOptions, NftOp } from './nft.js';
export type { OpenNft } from './handles.js';
export type { CallOptions, RestoreOptions, SaveOptions } from './commands.js';
export { IptablesBatch, createBatch, formatRestoreInput } from './batch.js';
export type { BatchOp, RestoreBlock, RestoreInput } from './batch.js';
export { IptablesError, isIptablesError } from './errors.js';
export type { IptablesErrorCode, IptablesErrorDetails } from './errors.js';
export { createRuleMemo, createSaveStream, parseIptablesSave, parseRuleListing } from './save.js';
export type { Chain, RuleListing, RuleMemo, SavedTable, SaveStream } from './save.js';
export type { Rule, RuleMatch, RuleOption, RuleTarget } from './rule.js';
export { displayArgs, formatArg, formatArgs, splitArgs } from './quote.js';
export { TABLES } from './validate.js';
export type { Family, Table } from './validate.js';
export { createSpawnExec } from './exec.js';
export type { CommandExec, CommandResult, CommandSpec } from './exec.js';
export { silentLogger } from './logger.js';
export type { Logger } from './logger.js';
