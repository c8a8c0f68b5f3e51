// The setup's own choice of host-local's address (native-pick.ts): host-local's range
// canonicalisation and iterator, and when the choice is left to host-local. On the real plugins
// (the files equal host-local's own): integration/src/native-ipam.test.ts.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ipaddr from 'ipaddr.js';
import { silentLogger } from '@allocnet/base';
import { parseNetworkConfig } from '@allocnet/cni';
import { tempDir } from '@allocnet/cni/testing';
import { addressPicker, candidates, rangeSetsOf } from './native-pick.js';
import { AddressPicks } from './picks.js';

const n = (a: string) =>
  ipaddr
    .parse(a)
    .toByteArray()
    .reduce((x, b) => (x << 8n) | BigInt(b), 0n);

it('canonicalises ranges as host-local does', () => {
  expect(rangeSetsOf({ subnet: '10.0.0.0/24' })).toEqual([
    [{ v6: false, prefix: 24, start: n('10.0.0.1'), end: n('10.0.0.254'), gateway: n('10.0.0.1') }],
  ]);
  // IPv6 ends at the last address; the old-style range comes before `ranges`.
  expect(
    rangeSetsOf({
      subnet: '10.0.0.0/30',
      ranges: [[{ subnet: 'fd00::/126', gateway: 'fd00::3' }]],
    }),
  ).toEqual([
    [{ v6: false, prefix: 30, start: n('10.0.0.1'), end: n('10.0.0.2'), gateway: n('10.0.0.1') }],
    [{ v6: true, prefix: 126, start: n('fd00::1'), end: n('fd00::3'), gateway: n('fd00::3') }],
  ]);
  // What host-local refuses (too small, host bits, a start outside, families mixed) or is not a
  // range at all: host-local is left to say so.
  for (const ipam of [
    { subnet: '10.0.0.0/31' },
    { subnet: '10.0.0.1/24' },
    { subnet: '10.0.0.0/24', rangeStart: '10.0.1.1' },
    { subnet: '10.0.0.0/24', rangeStart: '10.0.0.9', rangeEnd: '10.0.0.8' },
    { ranges: [[{ subnet: '10.0.0.0/24' }, { subnet: 'fd00::/64' }]] },
    { ranges: [[]] },
    { ranges: 'x' },
    {},
  ])
    expect([ipam, rangeSetsOf(ipam)]).toEqual([ipam, undefined]);
});

it('iterates as host-local’s GetIter and Next: from after the last reserved, round the set, past gateways', () => {
  const [set] = rangeSetsOf({
    ranges: [
      [
        {
          subnet: '10.0.0.0/24',
          rangeStart: '10.0.0.2',
          rangeEnd: '10.0.0.4',
          gateway: '10.0.0.3',
        },
        {
          subnet: '10.0.1.0/24',
          rangeStart: '10.0.1.1',
          rangeEnd: '10.0.1.2',
          gateway: '10.0.1.1',
        },
      ],
    ],
  }) ?? [[]];
  const all = (last?: string) =>
    [...candidates(set ?? [], last === undefined ? undefined : n(last))].map((c) =>
      ipaddr
        .fromByteArray([...Array(4).keys()].map((i) => Number((c >> BigInt(24 - 8 * i)) & 0xffn)))
        .toString(),
    );
  expect(all()).toEqual(['10.0.0.2', '10.0.0.4', '10.0.1.2']);
  expect(all('10.0.0.4')).toEqual(['10.0.1.2', '10.0.0.2', '10.0.0.4']);
  // The last reserved is a gateway: where it stands counts, not what it is.
  expect(all('10.0.1.1')).toEqual(['10.0.1.2', '10.0.0.2', '10.0.0.4']);
  // Outside the set (the ranges changed since): from the first range's start.
  expect(all('10.0.9.9')).toEqual(['10.0.0.2', '10.0.0.4', '10.0.1.2']);
});

describe('addressPicker', () => {
  let tmp: Awaited<ReturnType<typeof tempDir>>;
  beforeEach(async () => {
    tmp = await tempDir();
  });
  afterEach(async () => {
    await tmp.remove();
  });
  const ctx = () => ({ picks: new AddressPicks(), logger: silentLogger });
  const network = (main: Record<string, unknown>, ipam: Record<string, unknown> = {}) =>
    parseNetworkConfig(
      {
        cniVersion: '1.0.0',
        name: 'n',
        plugins: [
          { type: 'loopback' },
          {
            type: 'bridge',
            ...main,
            ipam: { type: 'host-local', subnet: '10.1.0.0/29', dataDir: tmp.path, ...ipam },
          },
        ],
      },
      'test',
    );
  const plain = { args: [] as [string, string][], capabilityArgs: {} };

  it('lets a write for an address another attempt picked wait until that attempt ended', async () => {
    await mkdir(join(tmp.path, 'n'));
    const c = ctx();
    const pick = addressPicker(network({}), plain, c);
    const held = pick?.(network({}));
    expect(held?.addresses).toEqual(['10.1.0.2/29']);
    const order: string[] = [];
    // Its own picks never hold the attempt up; another's do, until it ends.
    await c.picks.free(['10.1.0.2'], held?.holder);
    const waiting = c.picks.free(['10.1.0.3', '10.1.0.2']).then(() => order.push('free'));
    await new Promise((resolve) => setImmediate(resolve));
    order.push('ended');
    held?.done();
    await waiting;
    expect(order).toEqual(['ended', 'free']);
    // Nothing held: at once.
    await c.picks.free(['10.1.0.2']);
    expect([...c.picks.busy(join(tmp.path, 'n'))]).toEqual([]);
  });

  it('skips files and addresses picked by setups whose ADD has not ended, and asks for the rest', async () => {
    await mkdir(join(tmp.path, 'n'));
    await writeFile(join(tmp.path, 'n', 'last_reserved_ip.0'), '10.1.0.2');
    await writeFile(join(tmp.path, 'n', '10.1.0.3'), 'other\r\neth0');
    const c = ctx();
    const pick = addressPicker(network({}), plain, c);
    const first = pick?.(network({}));
    const second = pick?.(network({}));
    expect(first?.network.plugins[1]?.raw.args).toEqual({ cni: { ips: ['10.1.0.4'] } });
    expect(second?.network.plugins[1]?.raw.args).toEqual({ cni: { ips: ['10.1.0.5'] } });
    // As host-local's result will give them: with the range's prefix.
    expect([first?.addresses, second?.addresses]).toEqual([['10.1.0.4/29'], ['10.1.0.5/29']]);
    first?.done();
    expect([...c.picks.busy(join(tmp.path, 'n'))]).toEqual(['10.1.0.5']);
    // Free again once its ADD ended without a reservation.
    expect(pick?.(network({}))?.network.plugins[1]?.raw.args).toEqual({
      cni: { ips: ['10.1.0.4'] },
    });
  });

  it('leaves the choice to host-local for what it does not know or an address asked for', () => {
    const c = ctx();
    expect(addressPicker(network({}), plain, c)).toBeDefined();
    for (const [net, attachment] of [
      [network({}), { ...plain, args: [['IP', '10.1.0.5']] as [string, string][] }],
      [network({}), { ...plain, capabilityArgs: { ips: ['10.1.0.5'] } }],
      [network({ args: { cni: { ips: ['10.1.0.5'] } } }), plain],
      [network({ capabilities: { ipRanges: true } }), plain],
      [network({}, { resolvConf: '/etc/resolv.conf' }), plain],
      [network({ type: 'ptp' }), plain],
      [network({}, { subnet: '10.1.0.0/31' }), plain],
    ] as const)
      expect(addressPicker(net, attachment, c)).toBeUndefined();
  });
});
