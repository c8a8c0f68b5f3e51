import type { NftLink } from './nft.js';
import { MORE_MAX, readAt } from './nft-read.js';
import type { ReadAtOptions } from './nft-read.js';
import { chainOf } from './nft-messages.js';
import { chainMessage, commentInfo, expr, plainRules, ruleMessage } from './testing/index.js';
import type { NftExpression } from './testing/index.js';

const ACCEPT = [expr.counter(), expr.verdict(1)];
const jump = (chain: string, comment?: string): NftExpression[] => [
  ...(comment === undefined ? [] : [expr.match('comment', 0, commentInfo(comment))]),
  expr.counter(),
  expr.verdict(-3, chain),
];
const LIMIT: NftExpression = { name: 'limit', data: [[1, Buffer.alloc(8)]] };

/**
 * A link over a made-up ruleset: chains as the kernel lists them (in the order made), each with
 * its rules' expressions; `generations` answered in turn (then the last again). Records dumps.
 */
function fakeLink(
  ruleset: Record<string, { hook?: number; rules: NftExpression[][] }>,
  generations: number[] = [5],
) {
  const dumps: string[] = [];
  let handle = 100n;
  const handles = new Map<string, bigint[]>();
  for (const [key, c] of Object.entries(ruleset))
    handles.set(
      key,
      c.rules.map(() => handle++),
    );
  const link: NftLink = {
    generation: () =>
      Promise.resolve(
        generations.length > 1 ? (generations.shift() as number) : (generations[0] as number),
      ),
    chains: () =>
      Promise.resolve(
        Object.entries(ruleset).map(([key, c]) => {
          const [table, name] = key.split(' ') as [string, string];
          return chainOf(
            chainMessage({ table, name, ...(c.hook === undefined ? {} : { hook: c.hook }) }),
          ) as NonNullable<ReturnType<typeof chainOf>>;
        }),
      ),
    rules(table, chain, inspect) {
      const key = `${table} ${chain}`;
      dumps.push(key);
      const list = handles.get(key) ?? [];
      (ruleset[key]?.rules ?? []).forEach((exprs, i) =>
        inspect?.(i, ruleMessage({ table, chain, handle: list[i] as bigint, exprs })),
      );
      return Promise.resolve(list);
    },
    chainExists: () => Promise.resolve(true),
    commit: () => Promise.reject(new Error('not here')),
    close: () => undefined,
  };
  return { link, dumps, handles };
}

function logged() {
  const lines: string[] = [];
  const logger = {
    debug: (message: string, fields?: Record<string, unknown>) =>
      lines.push(`${message} ${JSON.stringify(fields ?? {})}`),
    info: () => undefined,
    warn: () => undefined,
    error: () => undefined,
  };
  return { lines, logger };
}

const ALLOC = /^CNI-(?:DN-)?[0-9a-f]+$/;
const TAG = 'name: "nomad" id: "a1"';

describe('readAt', () => {
  it('reads every chain in iptables-save’s order, built-in ones by hook, with places and handles', async () => {
    const { link, handles } = fakeLink({
      'nat CNI-HOSTPORT-DNAT': { rules: [] },
      'nat POSTROUTING': { hook: 4, rules: [ACCEPT, jump('CNI-HOSTPORT-MASQ', 'masq')] },
      'filter CNI-FORWARD': { rules: [ACCEPT] },
      'nat PREROUTING': { hook: 0, rules: [jump('CNI-HOSTPORT-DNAT')] },
      'nat CNI-HOSTPORT-MASQ': { rules: [] },
    });
    const read = await readAt(link, 'ipv4', {}, logged().logger);
    expect(read?.generation).toBe(5);
    expect(read?.tables.map((t) => [t.name, t.chains.map((c) => `${c.name}:${c.policy}`)])).toEqual(
      [
        ['filter', ['INPUT:ACCEPT', 'FORWARD:ACCEPT', 'OUTPUT:ACCEPT', 'CNI-FORWARD:undefined']],
        [
          'nat',
          [
            'PREROUTING:ACCEPT',
            'INPUT:ACCEPT',
            'OUTPUT:ACCEPT',
            'POSTROUTING:ACCEPT',
            'CNI-HOSTPORT-DNAT:undefined',
            'CNI-HOSTPORT-MASQ:undefined',
          ],
        ],
      ],
    );
    const nat = read?.tables[1];
    expect(plainRules(nat?.rules ?? []).map((r) => `${r.chain} ${r.spec.join(' ')}`)).toEqual([
      'PREROUTING -j CNI-HOSTPORT-DNAT',
      'POSTROUTING -j ACCEPT',
      'POSTROUTING -m comment --comment masq -j CNI-HOSTPORT-MASQ',
    ]);
    expect(nat?.places?.positions).toEqual([0, 0, 1]);
    expect(nat?.places?.sizes).toEqual(
      new Map([
        ['PREROUTING', 1],
        ['POSTROUTING', 2],
        ['CNI-HOSTPORT-DNAT', 0],
        ['CNI-HOSTPORT-MASQ', 0],
      ]),
    );
    expect(read?.lists.get('nat POSTROUTING')).toEqual(handles.get('nat POSTROUTING'));
    expect(read?.opaque).toEqual([]);
  });

  it('skips the rules of the chains it is told to, reads those `more` asks for after all', async () => {
    const { link, dumps } = fakeLink({
      'nat POSTROUTING': { hook: 4, rules: [jump('CNI-aaaa', TAG)] },
      'nat CNI-aaaa': { rules: [ACCEPT] },
      'nat CNI-bbbb': { rules: [ACCEPT, ACCEPT] },
    });
    const asked: string[][] = [];
    const options: ReadAtOptions = {
      skip: (_table, chain) => ALLOC.test(chain),
      more: (tables) => {
        asked.push(tables.flatMap((t) => t.rules.map((r) => r.chain)));
        return [{ table: 'nat' as const, chain: 'CNI-bbbb' }];
      },
    };
    const read = await readAt(link, 'ipv4', options, logged().logger);
    expect(asked).toEqual([['POSTROUTING']]);
    expect(dumps).toEqual(['nat POSTROUTING', 'nat CNI-bbbb']);
    const nat = read?.tables.find((t) => t.name === 'nat');
    expect(nat?.chains.map((c) => c.name)).toContain('CNI-aaaa');
    expect(nat?.rules.map((r) => r.chain)).toEqual(['POSTROUTING', 'CNI-bbbb', 'CNI-bbbb']);
    expect(nat?.places?.sizes.has('CNI-aaaa')).toBe(false);
    expect(read?.lists.has('nat CNI-aaaa')).toBe(false);
  });

  it('leaves out the rules `keep` refuses, counting them in their chain’s places', async () => {
    const { link } = fakeLink({
      'nat POSTROUTING': { hook: 4, rules: [jump('CNI-aaaa', 'known'), ACCEPT] },
    });
    const read = await readAt(
      link,
      'ipv4',
      { keep: (_chain, comment) => comment !== 'known' },
      logged().logger,
    );
    const nat = read?.tables.find((t) => t.name === 'nat');
    expect(plainRules(nat?.rules ?? []).map((r) => r.spec)).toEqual([['-j', 'ACCEPT']]);
    expect(nat?.places?.positions).toEqual([1]);
    expect(nat?.places?.sizes.get('POSTROUTING')).toBe(2);
  });

  it('gives the place, comment and target of a rule it could not read back', async () => {
    const { link } = fakeLink({
      'nat POSTROUTING': {
        hook: 4,
        rules: [ACCEPT, [expr.match('comment', 0, commentInfo(TAG)), LIMIT, ...jump('CNI-aaaa')]],
      },
    });
    const read = await readAt(link, 'ipv4', {}, logged().logger);
    expect(read?.opaque).toEqual([
      { table: 'nat', chain: 'POSTROUTING', position: 1, comment: TAG, target: 'CNI-aaaa' },
    ]);
    expect(read?.tables.find((t) => t.name === 'nat')?.places?.sizes.get('POSTROUTING')).toBe(2);
  });

  it('reads a chain of more rules than a spread call takes (some 120,000 here)', async () => {
    const message = ruleMessage({
      table: 'filter',
      chain: 'CNI-FORWARD',
      handle: 1n,
      exprs: ACCEPT,
    });
    const { link } = fakeLink({ 'filter CNI-FORWARD': { rules: [] } });
    const many = 130_000;
    const big: NftLink = {
      ...link,
      rules: (_table, _chain, inspect) => {
        for (let i = 0; i < many; i++) inspect?.(i, message);
        return Promise.resolve(Array.from({ length: many }, (_, i) => BigInt(i + 1)));
      },
    };
    const read = await readAt(big, 'ipv4', {}, logged().logger);
    expect(read?.tables[0]?.rules).toHaveLength(many);
    expect(read?.tables[0]?.places?.positions.at(-1)).toBe(many - 1);
  });

  it('reads again when the ruleset moved during the read, and gives up after three tries', async () => {
    const moved = fakeLink({ 'nat POSTROUTING': { hook: 4, rules: [ACCEPT] } }, [1, 2, 3, 3]);
    expect((await readAt(moved.link, 'ipv4', {}, logged().logger))?.generation).toBe(3);
    expect(moved.dumps).toEqual(['nat POSTROUTING', 'nat POSTROUTING']);

    const moving = fakeLink(
      { 'nat POSTROUTING': { hook: 4, rules: [ACCEPT] } },
      [1, 2, 3, 4, 5, 6, 7],
    );
    const { lines, logger } = logged();
    expect(await readAt(moving.link, 'ipv4', {}, logger)).toBeUndefined();
    expect(lines).toEqual([
      'nf_tables read: the ruleset changed under every try; reading with iptables-save {"family":"ipv4","tries":3}',
    ]);
  });

  it('gives up when `more` asks for too many chains, or a message is not understood', async () => {
    const { link } = fakeLink({ 'nat POSTROUTING': { hook: 4, rules: [ACCEPT] } });
    const { lines, logger } = logged();
    const many = Array.from({ length: MORE_MAX + 1 }, (_, i) => ({
      table: 'nat' as const,
      chain: `CNI-${i}`,
    }));
    expect(await readAt(link, 'ipv4', { more: () => many }, logger)).toBeUndefined();
    expect(lines).toEqual([
      `nf_tables read: ${MORE_MAX + 1} chains asked for after the first pass (at most ${MORE_MAX}); reading with iptables-save {"family":"ipv4"}`,
    ]);

    const broken: NftLink = {
      ...link,
      rules: (_table, _chain, inspect) => {
        inspect?.(0, Buffer.from([2, 0, 0, 0, 200, 0]));
        return Promise.resolve([1n]);
      },
    };
    lines.length = 0;
    expect(await readAt(broken, 'ipv4', {}, logger)).toBeUndefined();
    expect(lines).toEqual([
      'nf_tables read: a message not understood: a truncated attribute; reading with iptables-save {"family":"ipv4"}',
    ]);
  });
});
