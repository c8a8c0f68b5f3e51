// What a setup writes itself instead of the plugins (issue 30): the allocation's masquerade (bridge
// or ptp with ipMasq), the firewall's accept rules (iptables backend) and portmap's chain and
// jumps, in one iptables-restore per family (nat and filter, each table all or nothing): begun
// with the ADD when the setup picked the addresses host-local will give (native-pick.ts,
// `pickedResult`), so that the write and the bridge plugin's ADD, which both grow with the node,
// run at the same time; else as soon as the main plugin's result gives the addresses (add.ts).
// Then, once the main plugin answered, portmap's route_localnet sysctl (on the bridge, which the
// first ADD makes) and its removal of stale UDP conntrack entries, through the node seam
// (node.ts). The plugins' ADD runs loopback and the main plugin only (ipMasq false): the firewall
// and portmap do not run.
//
// Why: every iptables exec under nf_tables reads the whole ruleset, so each costs more the more
// allocations the node holds. bridge wrote its masquerade with 9 execs per address, portmap its
// rules with ~18 and the firewall with ~10 more (docs/cni.md): most of an ADD, and what made setup
// 6.7× slower at 1,000 live allocations than at 50. What is written is what the plugins write,
// rule for rule (`masqueradeOf` in marks.ts, native-rules.ts; the integration tests compare whole
// rulesets with the plugins' own): per-allocation chains made when they are not there (kept
// when they are), their rules and the jumps to them, each only when not there yet, as the
// plugins' unique appends do (`presentOf`: one netlink search per family, `iptables -S` only of a
// chain where a rule may already be). The rules every allocation shares (FORWARD's jump to
// CNI-FORWARD, portmap's CNI-HOSTPORT-* rules and jumps) are made sure of by the host preparer
// (host.ts), once per process, with the shared chains; a write that fails when one was removed
// since has them made again (`Heal`) and writes the rest once more. Which plugins are written here is an allow-list
// (`nativePlugins`): any option this code does not know runs that plugin itself.
//
// The CNI cache and the ADD intent keep the network as configured (ipMasq true, firewall and
// portmap in the chain): a DEL from them, by allocnet or any other CNI runtime, removes what was
// written here as the plugins would. A failed ADD's undo runs the reduced chain, so the setup
// removes what it wrote itself (`unwrite`: native-del.ts, and the firewall's accepts).
import type { Attachment, CniResult, NetworkConfig } from '@allocnet/cni';
import { createBatch, isIptablesError } from '@allocnet/iptables-node';
import type { CallOptions, Family, IptablesBatch, RuleSearchResult } from '@allocnet/iptables-node';
import { familyOf } from './address.js';
import type { ConfiguratorContext } from './context.js';
import { messageOf } from './errors.js';
import { firewallSpecs, masqueradeComment, masqueradeOf, needleOf, specKey } from './marks.js';
import { masqHandled, nativeDel, removeFirewallAccepts } from './native-del.js';
import {
  dnatComment,
  firewallSharedRules,
  nativePlugins,
  portmapAddresses,
  portmapSharedRules,
  portmapWrite,
  HOSTPORT,
} from './native-rules.js';
import type { NativeFirewall, NativePortmap, SharedRule } from './native-rules.js';
import type { IptablesState, PortMapping } from './types.js';

export interface NativeAdd {
  /** The chain the plugins' ADD runs: without what is written here, the main plugin's ipMasq off. */
  readonly network: NetworkConfig;
  /** The main plugin's type: its result carries the addresses. */
  readonly mainType: string;
  /** Writes the allocation's rules for the result's addresses; all or nothing per family and table. */
  rules(result: CniResult, call: CallOptions): Promise<void>;
  /**
   * portmap's work besides iptables, once the ADD made the interface route_localnet names:
   * route_localnet, then the deletion of stale UDP conntrack entries.
   */
  host(result: CniResult, call: CallOptions): Promise<void>;
  /** Whether the rules `rules` writes for `a` are those it writes for `b`. */
  sameRules(a: CniResult, b: CniResult): boolean;
  /** Removes what `rules` wrote (after a failed ADD, whose undo runs the reduced chain). */
  unwrite(result: CniResult, call: CallOptions): Promise<void>;
}

/** What a network's setup writes itself, from its config alone (the same for every allocation). */
export interface NativeParts {
  readonly masq: boolean;
  readonly firewall?: NativeFirewall;
  readonly portmap?: NativePortmap;
}

/** The main plugin's masquerade, the firewall and portmap, each when written here. */
export function nativeParts(network: NetworkConfig): NativeParts {
  const { firewall, portmap } = nativePlugins(network);
  return {
    masq: network.plugins.filter(masqHandled).length === 1,
    ...(firewall === undefined ? {} : { firewall }),
    ...(portmap === undefined ? {} : { portmap }),
  };
}

/** The shared rules a setup written here needs made sure of first, per family. */
export function sharedRulesOf(
  parts: NativeParts,
  families: readonly Family[],
  hasPorts: boolean,
): SharedRule[] {
  return families.flatMap((family) => [
    ...(parts.firewall === undefined ? [] : firewallSharedRules(family, parts.firewall.adminChain)),
    ...(parts.portmap === undefined || !hasPorts ? [] : portmapSharedRules(family, parts.portmap)),
  ]);
}

/**
 * The result the main plugin's ADD gives for addresses the setup picked (native-pick.ts), as far
 * as the rules read it: each address on the attachment's interface in its namespace.
 */
export function pickedResult(
  addresses: readonly string[],
  attachment: Pick<Attachment, 'ifName' | 'netns'>,
): CniResult {
  return {
    cniVersion: '1.0.0',
    interfaces: [{ name: attachment.ifName, sandbox: attachment.netns }],
    ips: addresses.map((address) => ({ address, interface: 0 })),
    routes: [],
    dns: {},
  };
}

/** The port mappings the attachment gives portmap (cniAttachment puts them there). */
function mappingsOf(attachment: Attachment): readonly PortMapping[] {
  const found = attachment.capabilityArgs?.portMappings;
  return Array.isArray(found) ? (found as PortMapping[]) : [];
}

/** The node-side interface portmap's route lookup finds: bridge's bridge, ptp's host veth. */
function hostInterface(result: CniResult): string | undefined {
  return result.interfaces.find((i) => (i.sandbox ?? '') === '')?.name;
}

/** What one allocation's write holds: which parts, for which network, id, interface and ports. */
interface WriteOf {
  readonly network: string;
  readonly allocId: string;
  readonly ifName: string;
  readonly masq: boolean;
  readonly firewall: NativeFirewall | undefined;
  readonly portmap: NativePortmap | undefined;
  readonly mappings: readonly PortMapping[];
}

/** One line of a write: a per-allocation chain declared (no `spec`), or a rule appended. */
export interface Line {
  readonly family: Family;
  readonly table: 'nat' | 'filter';
  readonly chain: string;
  readonly spec?: readonly string[];
}

const chainKey = (l: Line) => `${l.family} ${l.table} ${l.chain}`;
const lineKey = (l: Line) => `${chainKey(l)} ${l.spec === undefined ? '' : specKey(l.spec)}`;

/** What `result`'s write holds, in the plugins' order, each chain and rule once (their unique appends). */
function linesOf(w: WriteOf, result: CniResult): Line[] {
  const lines = new Map<string, Line>();
  const add = (line: Line) => {
    if (!lines.has(lineKey(line))) lines.set(lineKey(line), line);
  };
  if (w.masq)
    // In the plugin's order: per address, its ACCEPT, the MASQUERADE, its jump, each once.
    for (const ip of result.ips) {
      const m = masqueradeOf(w.network, w.allocId, ip.address);
      if (m === undefined) continue;
      add({ family: m.family, table: 'nat', chain: m.chain });
      for (const spec of m.rules) add({ family: m.family, table: 'nat', chain: m.chain, spec });
      add({ family: m.family, table: 'nat', chain: 'POSTROUTING', spec: m.jump });
    }
  if (w.firewall !== undefined)
    for (const ip of result.ips) {
      const [host = ''] = ip.address.split('/');
      const family = familyOf(host);
      if (family === undefined) continue;
      for (const spec of firewallSpecs(host, family))
        add({ family, table: 'filter', chain: 'CNI-FORWARD', spec });
    }
  if (w.portmap !== undefined && w.mappings.length > 0)
    for (const [family, address] of portmapAddresses(result, w.ifName)) {
      const p = portmapWrite(w.network, w.allocId, w.mappings, address, w.portmap);
      add({ family, table: 'nat', chain: p.chain });
      for (const spec of p.rules) add({ family, table: 'nat', chain: p.chain, spec });
      for (const spec of p.entries) add({ family, table: 'nat', chain: HOSTPORT.dnat, spec });
    }
  return [...lines.values()];
}

/**
 * Every family's batch of `lines`. Without `present`, a per-allocation chain is declared (made,
 * or emptied when it exists) and every rule appended; with it (what the chains hold, by
 * `lineKey`), a chain that exists is kept and a rule already in its chain is not written again.
 */
function batchesOf(
  lines: readonly Line[],
  present?: ReadonlySet<string>,
): Map<Family, IptablesBatch> {
  const out = new Map<Family, IptablesBatch>();
  for (const line of lines) {
    if (present?.has(lineKey(line)) === true) continue;
    let batch = out.get(line.family);
    if (batch === undefined) out.set(line.family, (batch = createBatch()));
    if (line.spec === undefined) batch.declareChain(line.table, line.chain);
    else batch.append(line.table, line.chain, line.spec);
  }
  return out;
}

/** What `chains` hold now, read with `iptables -S`, as `lineKey`s (a chain that exists as itself). */
async function exactlyPresent(
  ctx: ConfiguratorContext,
  chains: readonly Line[],
  call: CallOptions,
): Promise<Set<string>> {
  const present = new Set<string>();
  await Promise.all(
    chains.map(async ({ family, table, chain }) => {
      let rules;
      try {
        rules = await ctx.iptables[family].listRules(table, chain, call);
      } catch (error) {
        if (isIptablesError(error) && error.code === 'not-found') return;
        throw error;
      }
      present.add(lineKey({ family, table, chain }));
      for (const r of rules) present.add(lineKey({ family, table, chain, spec: r.spec }));
    }),
  );
  return present;
}

/** The chain a rule jumps to (`-j`), if it names one. */
function targetOf(spec: readonly string[] | undefined): string | undefined {
  const j = spec?.indexOf('-j') ?? -1;
  return j < 0 ? undefined : spec?.[j + 1];
}

/**
 * One family's chains (`own`: that family's lines) searched over netlink (`searchRules`), by
 * `chainKey`; undefined without netlink. A chain whose every rule jumps to a chain of the allocation's own (POSTROUTING's jump
 * to the masquerade chain, CNI-HOSTPORT-DNAT's to the DNAT chain) is searched only when one of
 * those chains exists: nf_tables keeps no jump to a chain that is not there, and those shared
 * chains grow with the node (a dump of each per setup was most of the search's cost at 1,000).
 * A chain left unsearched is left out of the answer: none of its rules is there.
 */
export async function searchedOf(
  iptables: Pick<IptablesState, 'searchRules'>,
  own: readonly Line[],
): Promise<Map<string, { chain: Line; found: RuleSearchResult }> | undefined> {
  const chains = [...new Map(own.map((l) => [chainKey(l), l] as const)).values()];
  const declared = new Set(own.filter((l) => l.spec === undefined).map(chainKey));
  const ownTargets = (c: Line): string[] | undefined => {
    const targets = own.filter((l) => chainKey(l) === chainKey(c) && l.spec).map((l) => targetOf(l.spec));
    const keys = targets.map((t) => (t === undefined ? '' : chainKey({ ...c, chain: t })));
    return keys.length > 0 && keys.every((k) => declared.has(k)) ? keys : undefined;
  }; // prettier-ignore
  const out = new Map<string, { chain: Line; found: RuleSearchResult }>();
  const search = async (some: readonly Line[]): Promise<boolean> => {
    if (some.length === 0) return true;
    const searched = await iptables.searchRules?.(
      some.map((c) => ({
        table: c.table,
        chain: c.chain,
        needles: own
          .filter((l) => chainKey(l) === chainKey(c) && l.spec)
          .flatMap((l) => needleOf(l.spec ?? []) ?? []),
      })),
    );
    if (searched === undefined) return false;
    some.forEach((c, i) => out.set(chainKey(c), { chain: c, found: searched[i] ?? { exists: false } }));
    return true;
  }; // prettier-ignore
  if (!(await search(chains.filter((c) => ownTargets(c) === undefined)))) return undefined;
  const reachable = chains.filter((c) =>
    ownTargets(c)?.some((k) => out.get(k)?.found.exists === true),
  );
  return (await search(reachable)) ? out : undefined;
}

/**
 * What the chains `lines` write to already hold (as `lineKey`s), as the plugins' unique appends
 * and their keeping of a chain that exists find it: netlink searches per family (`searchedOf`)
 * say which chains exist and which rules may be there (their comment or address in a rule of the
 * chain); only a chain of the allocation's own that exists, or one where a rule may be there, is
 * then read with `iptables -S` and compared rule for rule. Undefined without netlink (a fake):
 * the write then takes everything to be new.
 */
async function presentOf(
  ctx: ConfiguratorContext,
  lines: readonly Line[],
  call: CallOptions,
): Promise<Set<string> | undefined> {
  const present = new Set<string>();
  const families = [...new Set(lines.map((l) => l.family))];
  const outcomes = await Promise.all(
    families.map(async (family) => {
      const own = lines.filter((l) => l.family === family);
      const searched = await searchedOf(ctx.iptables[family], own);
      if (searched === undefined) return false;
      const reads = [...searched.values()].flatMap(({ chain: c, found }) => {
        if (!found.exists) return [];
        present.add(chainKey(c));
        const rules = own.filter((l) => chainKey(l) === chainKey(c) && l.spec);
        const declared = own.some((l) => chainKey(l) === chainKey(c) && l.spec === undefined);
        const unsure = rules.some((l) => needleOf(l.spec ?? []) === undefined);
        return declared || unsure || found.found.some(Boolean) ? [c] : [];
      });
      for (const key of await exactlyPresent(ctx, reads, call)) present.add(key);
      return true;
    }),
  );
  return outcomes.every(Boolean) ? present : undefined;
}

/**
 * Makes the shared chains and rules a write needs again when something removed them since the
 * host preparer made sure of them; true when it made anything.
 */
export type Heal = (call: CallOptions) => Promise<boolean>;

export function nativeAdd(
  ctx: ConfiguratorContext,
  network: NetworkConfig,
  attachment: Attachment,
  heal?: Heal,
): NativeAdd | undefined {
  const allocId = attachment.containerId;
  const parts = nativeParts(network);
  const masq = parts.masq && masqueradeComment(network.name, allocId) !== undefined;
  const { firewall } = parts;
  const portmap = dnatComment(network.name, allocId) === undefined ? undefined : parts.portmap;
  const main = network.plugins.find((p) => p.type === 'bridge' || p.type === 'ptp');
  if (main === undefined || (!masq && firewall === undefined && portmap === undefined))
    return undefined;
  const mappings = mappingsOf(attachment);
  const what: WriteOf = {
    network: network.name,
    allocId,
    ifName: attachment.ifName,
    masq,
    firewall,
    portmap,
    mappings,
  };
  const plugins = network.plugins
    .filter(
      (p) =>
        !(p.type === 'firewall' && firewall !== undefined) &&
        !(p.type === 'portmap' && portmap !== undefined),
    )
    .map((p) => (masq && masqHandled(p) ? { ...p, raw: { ...p.raw, ipMasq: false } } : p));

  /** portmap's side effects besides iptables, after its rules, as the plugin orders them. */
  async function portmapHost(result: CniResult, call: CallOptions): Promise<void> {
    if (portmap === undefined || mappings.length === 0) return;
    const addresses = portmapAddresses(result, attachment.ifName);
    const hostIf = hostInterface(result);
    if (portmap.snat && addresses.has('ipv4') && hostIf !== undefined)
      await ctx.node.setSysctl(`net/ipv4/conf/${hostIf}/route_localnet`, '1', call);
    const udp = mappings.filter((m) => m.protocol === 'udp').map((m) => m.hostPort);
    if (udp.length === 0) return;
    for (const family of addresses.keys()) {
      try {
        await ctx.node.forgetUdpFlows(family, udp, call);
      } catch (error) {
        // The plugin logs this and goes on: stale entries only delay the new rules' effect.
        ctx.logger.warn('deleting stale UDP conntrack entries failed', {
          allocId,
          family,
          error: messageOf(error),
        });
      }
    }
  }

  return {
    network: { ...network, plugins },
    mainType: main.type,
    async rules(result, call) {
      const lines = linesOf(what, result);
      // Both families to their end before anything else looks at the ruleset.
      const restore = async (present?: ReadonlySet<string>) => {
        const ends = await Promise.allSettled(
          [...batchesOf(lines, present)].map(([family, batch]) => {
            const ipt = ctx.iptables[family];
            const write = () => ipt.restore(batch, { ...call, perTable: true });
            // The searches' reads stay good past this write (iptables-node's searches.ts).
            return ipt.writeKeepingSearches?.(batch, needleOf, write) ?? write();
          }),
        );
        for (const end of ends) if (end.status === 'rejected') throw end.reason;
      };
      try {
        await restore(await presentOf(ctx, lines, call));
      } catch (error) {
        // A shared chain or rule removed since the host preparer made it (by an operator, a
        // firewall reload) fails the restore: made again, the rest of the write (a table that
        // committed stays) goes once more, as the plugins would have made them anyway.
        if (heal === undefined || call.signal?.aborted === true || !(await heal(call))) throw error;
        ctx.logger.warn('a shared chain or rule was gone; made it again and writing once more', {
          allocId,
          error: messageOf(error),
        });
        const chains = [...new Map(lines.map((l) => [chainKey(l), l] as const)).values()];
        await restore(await exactlyPresent(ctx, chains, call));
      }
    },
    host: portmapHost,
    sameRules(a, b) {
      const keys = (r: CniResult) => linesOf(what, r).map(lineKey).join('\n');
      return keys(a) === keys(b);
    },
    async unwrite(result, call) {
      const addresses = result.ips.map((ip) => ip.address.split('/')[0] ?? '');
      await nativeDel(ctx, network, { allocId, addresses })?.remove(call);
      if (firewall !== undefined) await removeFirewallAccepts(ctx, addresses, call);
    },
  };
}
