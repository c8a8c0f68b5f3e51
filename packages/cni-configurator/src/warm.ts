// The reap path warmed before an operator's first reap: leaked allocations in the plugins' full
// shape (bridge's masquerade, portmap's DNAT chain, the firewall's accepts: 11 iptables-save
// lines each, as Debian's plugins 1.1.1 leave them), made up in memory and run through the
// parse (what a reap reads with when netlink cannot serve it: sweep.ts), the plan and the removal
// of a real reap (leaks.ts `warmReap`). The read over netlink is not run: a reap's own first
// thousand rules warm it (docs/performance.md). Nothing changes on the host: the
// removal's nf_tables transactions are built and not sent, after the two reads a removal makes
// first (the ruleset's generation, one chain's handles), which warm the netlink calls.
//
// Why: a reap of thousands of leaks is tens of thousands of lines through the parse, the plan and
// the report, and the first one in a process runs them before V8 has compiled them: measured in
// the bench suite's reap-agent scenario, an agent's first ReapLeaks of 5,000 leaks was 1.21×
// [1.10, 1.38] its second (issue 28). One warm pass of a few thousand made-up leaks after the
// start, in slices like the reap itself, is what that costs once (docs/performance.md).
import ipaddr from 'ipaddr.js';
import type { Family } from '@allocnet/iptables-node';
import type { NetworkFacts } from './facts.js';
import { allocChains } from './marks.js';

/** The made-up allocations' ids: a prefix no scheduler gives (the version nibble is 0). */
export const warmAllocId = (i: number): string =>
  `3a57e000-0000-0000-0000-${i.toString(16).padStart(12, '0')}`;

/** The first IPv4 subnet of `facts`, as address and prefix length, if it has one. */
function v4Subnet(facts: NetworkFacts): { base: number; bits: number; text: string } | undefined {
  const s = facts.subnets.find((x) => x.family === ('ipv4' satisfies Family));
  if (s === undefined) return undefined;
  const [address, bits] = s.cidr;
  const size = 2 ** (32 - bits);
  const network = Math.floor(address.toByteArray().reduce((n, b) => n * 256 + b, 0) / size) * size;
  return {
    base: network,
    bits,
    text: `${ipaddr.fromByteArray(bytesOf(network)).toString()}/${bits}`,
  };
}

function bytesOf(n: number): number[] {
  return [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256);
}

/**
 * iptables-save text (filter, then nat, as iptables-save orders them) of `count` leaked
 * allocations of `facts`' network, each with one address of its first IPv4 subnet and one tcp
 * host port; undefined when the network has no IPv4 subnet.
 */
export function syntheticLeakSave(facts: NetworkFacts, count: number): string | undefined {
  const subnet = v4Subnet(facts);
  if (subnet === undefined) return undefined;
  const hosts = Math.max(1, 2 ** (32 - subnet.bits) - 3);
  const filter: string[] = ['*filter', ':INPUT ACCEPT [0:0]', ':FORWARD ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ':CNI-FORWARD - [0:0]']; // prettier-ignore
  const chains: string[] = [];
  const post: string[] = [];
  const masq: string[] = [];
  const dnat: string[] = [];
  const dn: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = warmAllocId(i);
    const ip = ipaddr.fromByteArray(bytesOf(subnet.base + 2 + (i % hosts))).toString();
    const port = 20000 + (i % 40000);
    const tag = `-m comment --comment "name: \\"${facts.name}\\" id: \\"${id}\\""`;
    const chain = allocChains(facts.name, id);
    filter.push(
      `-A CNI-FORWARD -d ${ip}/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
      `-A CNI-FORWARD -s ${ip}/32 -j ACCEPT`,
    );
    chains.push(`:${chain.masq} - [0:0]`, `:${chain.dnat} - [0:0]`);
    post.push(`-A POSTROUTING -s ${ip}/32 ${tag} -j ${chain.masq}`);
    masq.push(
      `-A ${chain.masq} -d ${subnet.text} ${tag} -j ACCEPT`,
      `-A ${chain.masq} ! -d 224.0.0.0/4 ${tag} -j MASQUERADE`,
    );
    const match = `-p tcp -m tcp --dport ${port}`;
    dnat.push(
      `-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"${facts.name}\\" id: \\"${id}\\"" -m multiport --dports ${port} -j ${chain.dnat}`,
    );
    dn.push(
      `-A ${chain.dnat} -s ${subnet.text} ${match} -j CNI-HOSTPORT-SETMARK`,
      `-A ${chain.dnat} -s 127.0.0.1/32 ${match} -j CNI-HOSTPORT-SETMARK`,
      `-A ${chain.dnat} ${match} -j DNAT --to-destination ${ip}:8080`,
    );
  }
  const nat = ['*nat', ':PREROUTING ACCEPT [0:0]', ':INPUT ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ':POSTROUTING ACCEPT [0:0]', ':CNI-HOSTPORT-DNAT - [0:0]', ':CNI-HOSTPORT-SETMARK - [0:0]']; // prettier-ignore
  return [...filter, 'COMMIT', ...nat, ...chains, ...post, ...masq, ...dnat, ...dn, 'COMMIT', ''].join('\n'); // prettier-ignore
}
