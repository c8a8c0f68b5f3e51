// The native ADD's netlink search (`searchedOf`): which chains it asks about, against a fake
// search. A shared chain whose rules only jump to the allocation's own chains is dumped only when
// one of those chains exists; the real-kernel results are in integration/src/native-add.test.ts.
import type { RuleSearch, RuleSearchResult } from '@allocnet/iptables-node';
import { searchedOf } from './native-add.js';
import type { Line } from './native-add.js';

const MASQ = 'CNI-0123456789abcdef01234567';
const lines: Line[] = [
  { family: 'ipv4', table: 'nat', chain: MASQ },
  { family: 'ipv4', table: 'nat', chain: MASQ, spec: ['-d', '10.77.0.0/16', '-j', 'ACCEPT'] },
  { family: 'ipv4', table: 'nat', chain: 'POSTROUTING', spec: ['-s', '10.77.0.2', '-j', MASQ] },
  { family: 'ipv4', table: 'filter', chain: 'CNI-FORWARD', spec: ['-s', '10.77.0.2', '-j', 'ACCEPT'] },
]; // prettier-ignore

/** A search that answers from `existing` (chains there) and records what it was asked. */
function fakeSearch(existing: ReadonlySet<string>) {
  const asked: string[][] = [];
  return {
    asked,
    searchRules(searches: readonly RuleSearch[]): Promise<readonly RuleSearchResult[]> {
      asked.push(searches.map((s) => `${s.table} ${s.chain}`));
      return Promise.resolve(
        searches.map((s) =>
          existing.has(s.chain)
            ? { exists: true, found: s.needles.map(() => false) }
            : { exists: false },
        ),
      );
    },
  };
}

describe('the native ADD search', () => {
  it('does not dump POSTROUTING for a jump to a masquerade chain that is not there', async () => {
    const fake = fakeSearch(new Set(['POSTROUTING', 'CNI-FORWARD']));
    const searched = await searchedOf(fake, lines);
    expect(fake.asked).toEqual([[`nat ${MASQ}`, 'filter CNI-FORWARD']]);
    expect([...(searched?.keys() ?? [])]).toEqual([`ipv4 nat ${MASQ}`, 'ipv4 filter CNI-FORWARD']);
  });

  it('searches POSTROUTING too when the masquerade chain is there (a jump to it may be)', async () => {
    const fake = fakeSearch(new Set([MASQ, 'POSTROUTING', 'CNI-FORWARD']));
    const searched = await searchedOf(fake, lines);
    expect(fake.asked).toEqual([[`nat ${MASQ}`, 'filter CNI-FORWARD'], ['nat POSTROUTING']]);
    expect(searched?.get('ipv4 nat POSTROUTING')?.found.exists).toBe(true);
  });

  it('is undefined without netlink', async () => {
    expect(await searchedOf({}, lines)).toBeUndefined();
  });
});
