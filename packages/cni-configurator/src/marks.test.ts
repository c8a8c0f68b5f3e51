import { parseIptablesSave } from '@allocnet/iptables-node';
import {
  allocChains,
  chainsOf,
  linesFirewallAbout,
  linesNotAbout,
  parseTag,
  tagOf,
} from './marks.js';

describe('parseTag', () => {
  it('reads the bridge plugin’s and portmap’s tags, and no other comment', () => {
    expect(parseTag('name: "nomad" id: "a1"')).toEqual({ network: 'nomad', allocId: 'a1' });
    expect(parseTag('dnat name: "my-net" id: "a1"')).toEqual({ network: 'my-net', allocId: 'a1' });
    for (const other of [
      undefined,
      'CNI firewall plugin rules',
      'name: "nomad"',
      'name: "nomad" id: "a1" and more',
      'snat name: "nomad" id: "a1"',
    ])
      expect(parseTag(other)).toBeUndefined();
  });

  it('agrees with the line filter, which reads the same tag in unparsed iptables-save lines', () => {
    for (const comment of [
      'name: \\"nomad\\" id: \\"a1\\"',
      'dnat name: \\"nomad\\" id: \\"a1\\"',
    ]) {
      const line = `-A POSTROUTING -s 172.26.64.2/32 -m comment --comment "${comment}" -j MASQUERADE`;
      const [nat] = parseIptablesSave(`*nat\n:POSTROUTING ACCEPT [0:0]\n${line}\nCOMMIT\n`);
      const rule = nat?.rules[0];
      expect(rule && tagOf(rule)).toEqual({ network: 'nomad', allocId: 'a1' });
      expect(linesNotAbout(new Set(['a1']), [])(line)).toBe(false);
      expect(linesNotAbout(new Set(['a2']), [])(line)).toBe(true);
    }
  });
});

describe('chainsOf', () => {
  it('names every chain of every allocation in every network, with its owner', () => {
    const a = allocChains('nomad', 'a1');
    const b = allocChains('other', 'a1');
    const c = allocChains('nomad', 'a2');
    expect([...chainsOf(['a1', 'a2'], ['nomad', 'other'])]).toEqual([
      [a.masq, 'a1'],
      [a.dnat, 'a1'],
      [b.masq, 'a1'],
      [b.dnat, 'a1'],
      [c.masq, 'a2'],
      [c.dnat, 'a2'],
      [allocChains('other', 'a2').masq, 'a2'],
      [allocChains('other', 'a2').dnat, 'a2'],
    ]);
  });
});

describe('linesFirewallAbout', () => {
  it('keeps the firewall plugin’s accept rules of the addresses, and no other line', () => {
    const keep = linesFirewallAbout(['172.26.64.2', 'fd00::2']);
    expect(
      [
        '*filter',
        ':CNI-FORWARD - [0:0]',
        '-A CNI-FORWARD -d 172.26.64.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
        '-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT',
        '-A CNI-FORWARD -s 172.26.64.20/32 -j ACCEPT',
        '-A CNI-FORWARD -s 10.172.26.64.2/32 -j ACCEPT',
        '-A CNI-FORWARD -s fd00::2/128 -j ACCEPT',
        '-A CNI-FORWARD -s fd00::20/128 -j ACCEPT',
        '-A POSTROUTING -s 172.26.64.2/32 -j CNI-0123',
        '-A FORWARD -s 172.26.64.2/32 -j ACCEPT',
      ].filter(keep),
    ).toEqual([
      '-A CNI-FORWARD -d 172.26.64.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      '-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT',
      '-A CNI-FORWARD -s fd00::2/128 -j ACCEPT',
    ]);
  });
});
