// The soak's judgements, pure: the node's state after the churn against its baseline (what the
// agent's own readings and the node's say is left), and the agent's memory growth after the
// warm-up. node-state.ts reads the real node into these shapes; the tests give them directly.
import { formatArgs } from '@allocnet/iptables-node';
import type { SavedTable } from '@allocnet/iptables-node';

/** iptables-save and ip6tables-save as lines `<table> <line>`, counters left out. */
export interface Rulesets {
  readonly ipv4: readonly string[];
  readonly ipv6: readonly string[];
}

/** How much host state a leak report holds (the agent's `HostState`, counted). */
export interface StateCounts {
  readonly rules: number;
  readonly chains: number;
  readonly reservations: number;
  readonly cacheFiles: number;
}

/** What the leak check reads from the node and the agent after the churn. */
export interface NodeState {
  readonly rules: Rulesets;
  /** Namespaces under /run/netns with the agent's prefix. */
  readonly namespaces: readonly string[];
  /** host-local reservation files of the network: the address and the id it holds it for. */
  readonly reservations: readonly { readonly address: string; readonly owner: string }[];
  /** Files under the agent's CNI cache dir, relative to it. */
  readonly cacheFiles: readonly string[];
  /** `ListAllocNetworks`. */
  readonly allocations: readonly { readonly allocId: string; readonly phase: string }[];
  /**
   * `ListLeaks`: each leaked allocation, the state no allocation id could be read from, and the
   * namespaces named like the agent's that no allocation has.
   */
  readonly leaks: readonly { readonly allocId: string; readonly state: StateCounts }[];
  readonly orphans: StateCounts;
  readonly strayNamespaces: readonly string[];
}

/** Where the readings come from, for the findings' text. */
export interface NodePlaces {
  readonly netnsPrefix: string;
  readonly ipamDir: string;
  readonly cacheDir: string;
}

/** One table's chains and rules as lines that compare equal exactly when they are the same. */
export function rulesetLines(tables: readonly SavedTable[]): string[] {
  return tables.flatMap((t) => [
    ...t.chains.map((c) => `${t.name} :${c.name} ${c.policy ?? '-'}`),
    ...t.rules.map((r) => `${t.name} -A ${r.chain} ${formatArgs(r.spec)}`),
  ]);
}

/** `lines` without one occurrence of each of `minus` (a multiset difference), in order. */
function without(lines: readonly string[], minus: readonly string[]): string[] {
  const left = new Map<string, number>();
  for (const l of minus) left.set(l, (left.get(l) ?? 0) + 1);
  return lines.filter((l) => {
    const n = left.get(l) ?? 0;
    if (n === 0) return true;
    left.set(l, n - 1);
    return false;
  });
}

/** At most `MAX_SHOWN` quoted items, then how many more. */
const MAX_SHOWN = 5;
function quoted(items: readonly string[]): string {
  const shown = items.slice(0, MAX_SHOWN).map((i) => JSON.stringify(i));
  const more = items.length - shown.length;
  return more > 0 ? `${shown.join(', ')} and ${more} more` : shown.join(', ');
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** `2 rules, 1 chain` (the non-zero counts), or `nothing`. */
export function describeCounts(c: StateCounts): string {
  const parts = [
    c.rules > 0 ? plural(c.rules, 'rule') : '',
    c.chains > 0 ? plural(c.chains, 'chain') : '',
    c.reservations > 0 ? plural(c.reservations, 'reservation') : '',
    c.cacheFiles > 0 ? plural(c.cacheFiles, 'cache file') : '',
  ].filter((p) => p !== '');
  return parts.length === 0 ? 'nothing' : parts.join(', ');
}

function isEmpty(c: StateCounts): boolean {
  return c.rules + c.chains + c.reservations + c.cacheFiles === 0;
}

/** Each way `now` is not clean against `baseline`, one line each; none when the node is clean. */
export function leakFindings(baseline: Rulesets, now: NodeState, places: NodePlaces): string[] {
  const findings: string[] = [];
  for (const family of ['ipv4', 'ipv6'] as const) {
    const added = without(now.rules[family], baseline[family]);
    const gone = without(baseline[family], now.rules[family]);
    if (added.length > 0)
      findings.push(
        `${family} rules: ${plural(added.length, 'line')} not in the baseline: ${quoted(added)}`,
      );
    if (gone.length > 0)
      findings.push(
        `${family} rules: ${plural(gone.length, 'baseline line')} gone: ${quoted(gone)}`,
      );
  }
  if (now.namespaces.length > 0)
    findings.push(
      `namespaces with the agent's prefix ${JSON.stringify(places.netnsPrefix)}: ${now.namespaces.length} left: ${quoted(now.namespaces)}`,
    );
  if (now.reservations.length > 0)
    findings.push(
      `host-local reservations in ${JSON.stringify(places.ipamDir)}: ${now.reservations.length} left: ${quoted(now.reservations.map((r) => `${r.address} for ${r.owner}`))}`,
    );
  if (now.cacheFiles.length > 0)
    findings.push(
      `CNI cache ${JSON.stringify(places.cacheDir)}: ${plural(now.cacheFiles.length, 'entry', 'entries')} left: ${quoted(now.cacheFiles)}`,
    );
  if (now.allocations.length > 0)
    findings.push(
      `alloc list: ${plural(now.allocations.length, 'allocation')} left: ${quoted(now.allocations.map((a) => `${a.allocId} ${a.phase}`))}`,
    );
  if (now.leaks.length > 0)
    findings.push(
      `leaks: ${plural(now.leaks.length, 'leaked allocation')}: ${quoted(now.leaks.map((l) => `${l.allocId}: ${describeCounts(l.state)}`))}`,
    );
  if (!isEmpty(now.orphans)) findings.push(`leaks: orphans: ${describeCounts(now.orphans)}`);
  if (now.strayNamespaces.length > 0)
    findings.push(
      `leaks: ${plural(now.strayNamespaces.length, 'stray namespace')}: ${quoted(now.strayNamespaces)}`,
    );
  return findings;
}

/** The growth limit: RSS at the end this much above the warm reading, or more, fails. */
export const RSS_GROWTH_LIMIT_PERCENT = 10;

/** How much `end` is above `warm`, in percent (negative when it shrank). */
export function growthPercent(warm: number, end: number): number {
  return ((end - warm) / warm) * 100;
}

/** The RSS verdict: undefined when the growth is under the limit, else why not. */
export function rssProblem(
  warmMiB: number,
  endMiB: number,
  limitPercent = RSS_GROWTH_LIMIT_PERCENT,
): string | undefined {
  const growth = growthPercent(warmMiB, endMiB);
  if (growth < limitPercent) return undefined;
  return `agent RSS grew ${growth.toFixed(1)}% after the warm-up (${warmMiB.toFixed(1)} → ${endMiB.toFixed(1)} MiB); the limit is ${limitPercent}%`;
}

/** The nearest-rank percentile of `values`, p in (0, 100]; 0 for no values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return (
    sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1] ?? 0
  );
}
