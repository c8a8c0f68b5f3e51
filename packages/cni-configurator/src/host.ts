import { createBatch, isIptablesError } from '@allocnet/iptables-node';
import type { CallOptions, Family, SavedTable, Table } from '@allocnet/iptables-node';
import type { Logger } from '@allocnet/cni';
import type { NetworkFacts } from './facts.js';
import type { IptablesState } from './types.js';

/** A chain the plugins of a network share with every other allocation. */
export interface SharedChain {
  readonly family: Family;
  readonly table: Table;
  readonly chain: string;
}

/** `-A <admin chain> -o <bridge> -d <subnet> -j ACCEPT`: traffic to the bridge passes the firewall. */
export interface AdminRule {
  readonly family: Family;
  readonly chain: string;
  readonly bridge: string;
  readonly subnet: string;
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
      chains.push({ family, table: 'nat', chain: 'CNI-HOSTPORT-MASQ' });
      if (facts.portmap.setMarkChain)
        chains.push({ family, table: 'nat', chain: 'CNI-HOSTPORT-SETMARK' });
    }
  }
  return chains;
}

/** The admin rule's spec in the order iptables-save prints it. */
export function adminRuleSpec(rule: AdminRule): string[] {
  return ['-d', rule.subnet, '-o', rule.bridge, '-j', 'ACCEPT'];
}

function hasChain(tables: readonly SavedTable[], table: Table, chain: string): boolean {
  return tables.some((t) => t.name === table && t.chains.some((c) => c.name === chain));
}

function hasRule(tables: readonly SavedTable[], rule: AdminRule): boolean {
  const want = adminRuleSpec(rule).join('\0');
  return tables.some(
    (t) =>
      t.name === 'filter' &&
      t.rules.some((r) => r.chain === rule.chain && r.spec.join('\0') === want),
  );
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
  rules: readonly AdminRule[],
  logger: Logger,
  call?: CallOptions,
): Promise<{ chains: SharedChain[]; rules: AdminRule[] }> {
  const tables = await ipt.save(call);
  const missingChains = chains.filter(
    (c) => c.family === ipt.family && !hasChain(tables, c.table, c.chain),
  );
  const missingRules = rules.filter((r) => r.family === ipt.family && !hasRule(tables, r));
  if (missingChains.length === 0 && missingRules.length === 0) return { chains: [], rules: [] };
  const batch = createBatch();
  for (const c of missingChains) batch.newChain(c.table, c.chain);
  for (const r of missingRules) batch.append('filter', r.chain, adminRuleSpec(r));
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
      if (!(await ipt.ruleExists('filter', r.chain, adminRuleSpec(r), call)))
        await ipt.append('filter', r.chain, adminRuleSpec(r), call);
    }
  }
  return { chains: missingChains, rules: missingRules };
}
