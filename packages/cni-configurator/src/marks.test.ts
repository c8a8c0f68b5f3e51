import { parseIptablesSave } from '@allocnet/iptables-node';
import {
  allocChains,
  chainsOf,
  firewallSpecs,
  hasSpec,
  isAllocChain,
  linesFirewallAbout,
  linesNotAbout,
  matchOption,
  parseTag,
  sourceOf,
  specKey,
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

describe('specKey and hasSpec', () => {
  const rulesOf = (...lines: string[]) =>
    parseIptablesSave(['*filter', ':CNI-FORWARD - [0:0]', ...lines, 'COMMIT'].join('\n'))[0]
      ?.rules ?? [];

  it('compares an address as an address, however it is written, and every other word exactly', () => {
    expect(specKey(['-s', 'fd00:0:0::2/128', '-j', 'ACCEPT'])).toBe(
      specKey(['-s', 'fd00::2/128', '-j', 'ACCEPT']),
    );
    expect(specKey(['-s', '172.26.64.2/32'])).not.toBe(specKey(['-s', '172.26.64.2/31']));
    expect(specKey(['-s', '172.26.64.2/32'])).not.toBe(specKey(['-d', '172.26.64.2/32']));
    expect(specKey(['-s', '::ffff:172.26.64.2/128'])).not.toBe(specKey(['-s', '172.26.64.2/32']));
    // Not an address: kept as it is.
    expect(specKey(['-s', '300.1.2.3/32'])).toBe(['-s', '300.1.2.3/32'].join('\0'));
  });

  it('finds the firewall rules of an address in a listing, and no other address', () => {
    const rules = rulesOf(
      '-A CNI-FORWARD -d 172.26.64.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      '-A CNI-FORWARD -s 172.26.64.2/32 -j ACCEPT',
      '-A CNI-FORWARD -s fd00::2/128 -j ACCEPT',
    );
    expect(rules).toHaveLength(3);
    for (const spec of firewallSpecs('172.26.64.2', 'ipv4'))
      expect(hasSpec(rules, spec)).toBe(true);
    expect(hasSpec(rules, firewallSpecs('172.26.64.20', 'ipv4')[1] ?? [])).toBe(false);
    expect(hasSpec(rules, firewallSpecs('fd00:0::2', 'ipv6')[1] ?? [])).toBe(true);
    expect(hasSpec(rules, firewallSpecs('fd00:0::2', 'ipv6')[0] ?? [])).toBe(false);
    expect(hasSpec([], firewallSpecs('172.26.64.2', 'ipv4')[1] ?? [])).toBe(false);
  });
});

describe('sourceOf', () => {
  it('gives what matchOption gives for -s, without reading the matches', () => {
    const lines = [
      '-A POSTROUTING -s 10.88.0.5/32 -m comment --comment "name: \\"n\\" id: \\"a\\"" -j CNI-0123456789abcdef01234567',
      '-A POSTROUTING ! -s 10.88.0.0/16 -j MASQUERADE',
      '-A POSTROUTING -d 10.88.0.5/32 -j ACCEPT',
      '-A POSTROUTING -m comment --comment "-s" -j ACCEPT',
      '-A POSTROUTING -s fd00::5/128 -d fd00::6/128 -p tcp -m tcp --dport 80 -j ACCEPT',
      '-A POSTROUTING -j RETURN',
    ];
    const [nat] = parseIptablesSave(
      `*nat\n:POSTROUTING ACCEPT [0:0]\n${lines.join('\n')}\nCOMMIT\n`,
    );
    const rules = nat?.rules ?? [];
    expect(rules).toHaveLength(lines.length);
    expect(rules.map(sourceOf)).toEqual(rules.map((r) => matchOption(r, '-s')));
    expect(rules.map(sourceOf)).toEqual([
      '10.88.0.5/32',
      '10.88.0.0/16',
      undefined,
      undefined,
      'fd00::5/128',
      undefined,
    ]);
  });
});

describe('isAllocChain', () => {
  it('is true of the chains the plugins name after an allocation, and of nothing else', () => {
    const { masq, dnat } = allocChains('nomad', 'a1');
    expect([masq, dnat].map(isAllocChain)).toEqual([true, true]);
    const others = [
      'POSTROUTING',
      'CNI-FORWARD',
      'CNI-HOSTPORT-DNAT',
      `${masq}0`,
      masq.slice(0, -1),
      masq.toUpperCase(),
      dnat.replace('CNI-DN-', 'CNI-XX-'),
      `CNI-DN-${'g'.repeat(21)}`,
    ];
    expect(others.map(isAllocChain)).toEqual(others.map(() => false));
  });
});
