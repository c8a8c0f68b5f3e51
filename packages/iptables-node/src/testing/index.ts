import { createHash } from 'node:crypto';
import type { IptablesBatch } from '../batch.js';
import type { Rule } from '../rule.js';
import type { CommandExec, CommandResult, CommandSpec } from '../exec.js';

/** What the recording exec saw for one process. */
export interface RecordedCommand {
  readonly file: string;
  readonly args: readonly string[];
  readonly input: string | undefined;
  /** `file` and `args` as one array, for exact argv assertions. */
  readonly argv: readonly string[];
}

export type Reply = CommandResult | ((spec: CommandSpec) => CommandResult);

/** A fake `CommandExec` that records every command and answers from a queue of replies. */
export interface RecordingExec extends CommandExec {
  readonly calls: readonly RecordedCommand[];
  /** Queues replies, used in order; when the queue is empty the exec answers `exit 0`. */
  reply(...replies: Reply[]): this;
}

/** A successful exit with this stdout. */
export function ok(stdout = ''): CommandResult {
  return { kind: 'exited', exitCode: 0, stdout, stderr: '' };
}

/** A failed exit with this status and stderr. */
export function exit(exitCode: number, stderr: string, stdout = ''): CommandResult {
  return { kind: 'exited', exitCode, stdout, stderr };
}

export function createRecordingExec(): RecordingExec {
  const calls: RecordedCommand[] = [];
  const queue: Reply[] = [];
  return {
    calls,
    reply(...replies) {
      queue.push(...replies);
      return this;
    },
    run(spec) {
      calls.push({
        file: spec.file,
        args: [...spec.args],
        input: spec.input,
        argv: [spec.file, ...spec.args],
      });
      const next = queue.shift() ?? ok();
      const result = typeof next === 'function' ? next(spec) : next;
      // As an exec that has the output only at the end: once, whole, and then the reader has it.
      if (spec.onStdout === undefined || result.stdout === '') return Promise.resolve(result);
      spec.onStdout(Buffer.from(result.stdout, 'utf8'));
      return Promise.resolve({ ...result, stdout: '' });
    },
  };
}

/** What the bridge plugin's ipMasq writes for one attachment; see `addBridgeMasquerade`. */
export interface BridgeMasquerade {
  /** The CNI network name, e.g. `nomad`. */
  readonly network: string;
  /** The container (allocation) id. */
  readonly id: string;
  /** The attachment's IPv4 address, without a prefix length. */
  readonly ip: string;
  /** The network's subnet, default `172.26.64.0/20` (Nomad's bridge). */
  readonly subnet?: string;
}

/** The bridge plugin's chain name: `CNI-` and the first 24 hex digits of sha512(network + id). */
export function bridgeChainName(network: string, id: string): string {
  return `CNI-${createHash('sha512')
    .update(network + id)
    .digest('hex')
    .slice(0, 24)}`;
}

/** The bridge plugin's comment on every rule of one attachment. */
export function bridgeComment(network: string, id: string): string {
  return `name: "${network}" id: "${id}"`;
}

/**
 * Adds to `batch` exactly what the Debian bridge plugin (1.1.1, ipMasq) leaves in nat for one
 * attachment, as read back from a real run: chain `CNI-<h>` with an ACCEPT for the subnet and a MASQUERADE for
 * all but multicast, and a POSTROUTING jump for the address, each with the plugin's comment.
 * For tests and demos that need the plugin's leak without running the plugin.
 */
export function addBridgeMasquerade(batch: IptablesBatch, m: BridgeMasquerade): IptablesBatch {
  const chain = bridgeChainName(m.network, m.id);
  const comment = ['-m', 'comment', '--comment', bridgeComment(m.network, m.id)];
  return batch
    .newChain('nat', chain)
    .append('nat', chain, ['-d', m.subnet ?? '172.26.64.0/20', ...comment, '-j', 'ACCEPT'])
    .append('nat', chain, ['!', '-d', '224.0.0.0/4', ...comment, '-j', 'MASQUERADE'])
    .append('nat', 'POSTROUTING', ['-s', `${m.ip}/32`, ...comment, '-j', chain]);
}

/**
 * `value` with every rule in it (at any depth: arrays, maps, objects) made a plain object of its
 * fields, its matches read. A parsed rule reads its matches only when asked (rule.ts), and
 * `toEqual` sees only own fields: through this, it compares the matches too, against a literal
 * rule or between two parses.
 */
export function plainRules<T>(value: T): T {
  return plain(value) as T;
}

function plain(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(plain);
  if (value instanceof Map) return new Map([...value].map(([k, v]) => [k, plain(v)]));
  if (typeof value !== 'object' || value === null) return value;
  const rule = value as Partial<Rule>;
  if (Array.isArray(rule.spec) && typeof rule.chain === 'string' && 'matches' in value) {
    const { table, chain, spec, matches, comment, target } = rule;
    return { table, chain, spec, matches, comment, target };
  }
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
}

export {
  be32,
  chainMessage,
  commentInfo,
  cstring,
  encodeAttributes,
  expr,
  ruleMessage,
} from './nft-messages.js';
export type { NftAttribute, NftExpression } from './nft-messages.js';
