export { createIptables, restoreErrorLine } from './iptables.js';
export type { CallOptions, Iptables, IptablesOptions } from './iptables.js';
export { IptablesBatch, createBatch, formatRestoreInput } from './batch.js';
export type { BatchOp, RestoreBlock, RestoreInput } from './batch.js';
export { IptablesError, classifyFailure, isIptablesError } from './errors.js';
export type { IptablesErrorCode, IptablesErrorDetails } from './errors.js';
export { SaveParseError, parseIptablesSave, parseRuleListing } from './save.js';
export type { Chain, RuleListing, SavedTable } from './save.js';
export { RuleParseError, ruleFromTokens } from './rule.js';
export type { Rule, RuleMatch, RuleOption, RuleTarget } from './rule.js';
export {
  QuoteError,
  displayArgs,
  formatArg,
  formatArgs,
  splitArgs,
  splitStatements,
} from './quote.js';
export type { Statement, Token } from './quote.js';
export { rollbackOps } from './rollback.js';
export { TABLES, netnsPath } from './validate.js';
export type { Family, Table } from './validate.js';
export { createExecaRunner } from './exec.js';
export { silentLogger } from './runner.js';
export type { CommandResult, CommandRunner, CommandSpec, Logger } from './runner.js';
