// The host prerequisites: the chains (and rules) every allocation of a network shares, made
// sure of before its first setup; the rules are those of the plugins the setup writes itself
// (native-rules.ts) and the default network's admin rules.
import { createBatch, isIptablesError } from '@allocnet/iptables-node';
import type {
  CallOptions,
  Family,
  IptablesBatch,
  SavedTable,
  Table,
} from '@allocnet/iptables-node';
import type { Logger } from '@allocnet/cni';
import type { ConfiguratorContext } from './context.js';
import type { NetworkFacts } from './facts.js';
import { specKey } from './marks.js';
import type { SharedRule } from './native-rules.js';
import type { DefaultNetworkSettings } from './networks.js';
import type { IptablesState } from './types.js';

/** A chain the plugins of a network share with every other allocation. */
export interface SharedChain {
  readonly family: Family;
  readonly table: Table;
  readonly chain: string;
}

/** The shared chains a network's plugins create on their first ADD. */
export function sharedChains(facts: NetworkFacts): SharedChain[] {
  const chains: SharedChain[] = [];
  for (const family of facts.families) {
    if (facts.firewallAdminChain !== undefined) {
      chains.push({ family, table: 'filter', chain: 'CNI-FORWARD' });
      chains.push({ family, table: 'filter', chain: facts.firewallAdminChain });
    }
    if (facts.portmap !== undefined) {
      chains.push({ family, table: 'nat', chain: 'CNI-HOSTPORT-DNAT' });
      // portmap makes these two only with snat, and without an external set-mark chain.
      if (facts.portmap.setMarkChain) {
        chains.push({ family, table: 'nat', chain: 'CNI-HOSTPORT-MASQ' });
        chains.push({ family, table: 'nat', chain: 'CNI-HOSTPORT-SETMARK' });
      }
    }
  }
  return chains;
}

/** The admin rule's spec in the order iptables-save prints it. */
export function adminRuleSpec(bridge: string, subnet: string): string[] {
  return ['-d', subnet, '-o', bridge, '-j', 'ACCEPT'];
}

function hasChain(tables: readonly SavedTable[], table: Table, chain: string): boolean {
  return tables.some((t) => t.name === table && t.chains.some((c) => c.name === chain));
}

function hasRule(tables: readonly SavedTable[], rule: SharedRule): boolean {
  const want = specKey(rule.spec);
  return tables.some(
    (t) =>
      t.name === rule.table &&
      t.rules.some((r) => r.chain === rule.chain && specKey(r.spec) === want),
  );
}

/** Puts `rule` in `batch` where the plugin puts it: at its chain's head, or at its end. */
function addRule(batch: IptablesBatch, rule: SharedRule): IptablesBatch {
  return rule.first
    ? batch.insert(rule.table, rule.chain, rule.spec, 1)
    : batch.append(rule.table, rule.chain, rule.spec);
}

/**
 * Creates what is missing of `chains` and `rules` in one family: one iptables-save to see what is
 * there, one iptables-restore for the rest. When the restore loses a race (another process made a
 * chain in between; exit status 4 under nf_tables), each missing piece is made on its own,
 * tolerating "already exists". Returns what it created.
 */
export async function ensureHostState(
  ipt: IptablesState,
  chains: readonly SharedChain[],
  rules: readonly SharedRule[],
  logger: Logger,
  call?: CallOptions,
): Promise<{ chains: SharedChain[]; rules: SharedRule[] }> {
  const tables = await ipt.save(call);
  const missingChains = chains.filter(
    (c) => c.family === ipt.family && !hasChain(tables, c.table, c.chain),
  );
  const missingRules = rules.filter((r) => r.family === ipt.family && !hasRule(tables, r));
  if (missingChains.length === 0 && missingRules.length === 0) return { chains: [], rules: [] };
  const batch = createBatch();
  for (const c of missingChains) batch.newChain(c.table, c.chain);
  for (const r of missingRules) addRule(batch, r);
  try {
    await ipt.restore(batch, call);
  } catch (error) {
    if (!isIptablesError(error) || error.code === 'aborted') throw error;
    logger.warn(
      'shared iptables state changed while allocnet created it; creating it piece by piece',
      {
        family: ipt.family,
        error: error.message,
      },
    );
    for (const c of missingChains) {
      try {
        await ipt.newChain(c.table, c.chain, call);
      } catch (chainError) {
        if (!(isIptablesError(chainError) && chainError.code === 'already-exists'))
          throw chainError;
      }
    }
    for (const r of missingRules) {
      if (!(await ipt.ruleExists(r.table, r.chain, r.spec, call)))
        await ipt.restore(addRule(createBatch(), r), call);
    }
  }
  return { chains: missingChains, rules: missingRules };
}

/**
 * The default network's `-A <admin chain> -o <bridge> -d <subnet> -j ACCEPT`, per family:
 * traffic to the bridge passes the firewall (allocnet's, as Nomad's client writes it).
 */
export function adminRules(settings: DefaultNetworkSettings): SharedRule[] {
  const rule = (family: Family, subnet: string): SharedRule => ({
    family,
    table: 'filter',
    chain: settings.adminChain,
    spec: adminRuleSpec(settings.bridge, subnet),
    first: false,
  });
  return [
    rule('ipv4', settings.subnet),
    ...(settings.ipv6Subnet === undefined ? [] : [rule('ipv6', settings.ipv6Subnet)]),
  ];
}

/** Makes sure of a network's host prerequisites before its ADD. */
export type PrepareHost = (
  facts: NetworkFacts,
  isDefault: boolean,
  call: { signal?: AbortSignal },
  /** The shared rules of the plugins the setup writes itself (native-add.ts `sharedRulesOf`). */
  shared?: readonly SharedRule[],
  /** Look again, whatever this process made sure of before (a write found something gone). */
  fresh?: boolean,
) => Promise<boolean>;

/**
 * The shared chains (and, for the default network, the admin rules) a setup needs, made sure of
 * once per process: `prepared` holds what this process has made sure of, by
 * `family:table:chain`; `fresh` looks again (native-add.ts, when a write finds one gone).
 * Resolves whether it made anything. It is read and written without a lock (setup.ts says when two setups
 * prepare at once; `ensureHostState` tolerates the lost race).
 */
export function createHostPreparer(
  ctx: Pick<ConfiguratorContext, 'iptables' | 'logger' | 'settings'>,
): PrepareHost {
  const { iptables, logger, settings } = ctx;
  const prepared = new Set<string>();
  const chainKey = (c: SharedChain) => `${c.family}:${c.table}:${c.chain}`;
  const ruleKey = (r: SharedRule) => `${r.family}:rule:${r.table}:${r.chain}:${specKey(r.spec)}`;

  return async (facts, isDefault, call, shared = [], fresh = false) => {
    const known = (key: string) => !fresh && prepared.has(key);
    const chains = sharedChains(facts).filter((c) => !known(chainKey(c)));
    const rules = [...(isDefault ? adminRules(settings) : []), ...shared].filter(
      (r) => !known(ruleKey(r)),
    );
    if (isDefault)
      for (const r of adminRules(settings))
        if (!known(ruleKey(r)) && !chains.some((c) => c.family === r.family && c.chain === r.chain))
          chains.push({ family: r.family, table: 'filter', chain: r.chain });
    const families = [...new Set([...chains.map((c) => c.family), ...rules.map((r) => r.family)])];
    let madeAny = false;
    await Promise.all(
      families.map(async (family) => {
        const made = await ensureHostState(
          iptables[family],
          chains.filter((c) => c.family === family),
          rules.filter((r) => r.family === family),
          logger,
          call,
        );
        if (made.chains.length > 0 || made.rules.length > 0) madeAny = true;
        if (made.chains.length > 0 || made.rules.length > 0)
          logger.debug('host prerequisites created', {
            family,
            chains: made.chains.map((c) => c.chain),
            rules: made.rules.length,
          });
      }),
    );
    chains.forEach((c) => prepared.add(chainKey(c)));
    rules.forEach((r) => prepared.add(ruleKey(r)));
    return madeAny;
  };
}
