// An IPv4-only network's interface (`NetworkFacts.ipv4Only`) without IPv6. Why:
// - an interface given only IPv4 addresses should not be reachable over IPv6 (its link-local
//   address, or one from a router advertisement on the bridge), where no rule written for it
//   applies. Docker made the same change in Engine 26.0.2 (CVE-2024-32473);
// - a bridge floods each port's IPv6 multicast (duplicate address detection, router
//   solicitations, MLD reports) to every other port: with a thousand allocations on it, the
//   bridge plugin's ADD grew from 15 to 40 ms with IPv6 on in the containers, to 22 ms with it off
//   in their namespaces' default, to 28 ms turned off on each interface after its ADD
//   (docs/performance.md).
// How, by whose namespace it is:
// - one the runner made for the allocation (`SetupOptions.ownNamespace`): while the ADD runs
//   (every attempt of it), the namespace's default for new interfaces,
//   net/ipv6/conf/default/disable_ipv6, is 1, and after it what it was. The interface the plugin
//   makes there (bridge's or ptp's veth, macvlan's, ipvlan's) never starts IPv6. Only while the
//   ADD runs, so that an interface made later (by a task, or by a network that gives IPv6) starts
//   as the namespace's default says; the runner runs one operation per allocation at a time, so
//   no other ADD of this namespace runs meanwhile;
// - one a task driver or a runtime made: its default is theirs, and another of their ADDs may run
//   in it meanwhile. The interface's own disable_ipv6 is set after the ADD: it had IPv6 for the
//   few milliseconds between its start and then.
// A plugin that gives an IPv6 address turns IPv6 on for its interface itself. The veth's host
// end moves to the node's namespace and takes that namespace's default there.
import type { ConfiguratorContext } from './context.js';
import { messageOf } from './errors.js';

const DEFAULT_DISABLE_IPV6 = 'net/ipv6/conf/default/disable_ipv6';

/** Where the setup runs and for what: the namespace, the interface the ADD makes, the log's fields. */
export interface Ipv6OffAt {
  readonly netns: string;
  readonly ifName: string;
  /** The runner made the namespace for this allocation (`SetupOptions.ownNamespace`). */
  readonly own: boolean;
  readonly log: { readonly allocId: string; readonly network: string };
}

/**
 * Runs `add` and leaves the interface it makes without IPv6, when `off`; else just runs it. In
 * the allocation's own namespace, a failure to turn the default off fails the setup before any
 * plugin runs, and one to put it back is logged; elsewhere, a failure to turn the interface's
 * IPv6 off after the ADD is logged. Either way the setup goes on: its IPv4 is as it should be.
 */
export async function withIpv6Off<T>(
  ctx: ConfiguratorContext,
  at: Ipv6OffAt,
  off: boolean,
  add: () => Promise<T>,
): Promise<T> {
  if (!off) return add();
  if (!at.own) {
    const added = await add();
    await swapOrWarn(ctx, at, `net/ipv6/conf/${at.ifName}/disable_ipv6`, '1');
    return added;
  }
  const before = await ctx.node.swapSysctlIn(at.netns, DEFAULT_DISABLE_IPV6, '1');
  // No IPv6 in this kernel, or off for new interfaces already: nothing to put back.
  if (before === undefined || before === '1') return add();
  try {
    return await add();
  } finally {
    await swapOrWarn(ctx, at, DEFAULT_DISABLE_IPV6, before);
  }
}

/** Sets the sysctl in the allocation's namespace; a failure is a warning naming it. */
async function swapOrWarn(
  ctx: ConfiguratorContext,
  at: Ipv6OffAt,
  sysctl: string,
  value: string,
): Promise<void> {
  try {
    await ctx.node.swapSysctlIn(at.netns, sysctl, value);
  } catch (error) {
    ctx.logger.warn('setting an IPv6 sysctl of the allocation’s namespace failed', {
      ...at.log,
      netns: at.netns,
      sysctl,
      value,
      error: messageOf(error),
    });
  }
}
