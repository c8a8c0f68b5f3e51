import { formatRestoreInput } from './batch.js';
import { rollbackOps } from './rollback.js';
import { parseIptablesSave } from './save.js';
import type { SavedTable } from './save.js';

function table(text: string): SavedTable {
  const [parsed] = parseIptablesSave(`*nat\n${text}COMMIT\n`);
  if (parsed === undefined) throw new Error('no table');
  return parsed;
}

function undo(before: string, after: string, touched: string[]): string {
  return formatRestoreInput(rollbackOps('nat', table(before), table(after), new Set(touched))).text;
}

describe('rollbackOps', () => {
  it('removes chains and rules the batch added', () => {
    expect(
      undo(
        ':POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -j OLD\n',
        ':POSTROUTING ACCEPT [0:0]\n:CNI-A - [0:0]\n-A POSTROUTING -j OLD\n-A POSTROUTING -s 10.0.0.2/32 -j CNI-A\n-A CNI-A -j MASQUERADE\n',
        ['POSTROUTING', 'CNI-A'],
      ),
    ).toBe('*nat\n-D POSTROUTING -s 10.0.0.2/32 -j CNI-A\n-F CNI-A\n-X CNI-A\nCOMMIT\n');
  });

  it('brings back deleted rules at their old positions and deleted chains with their rules', () => {
    expect(
      undo(
        ':POSTROUTING ACCEPT [0:0]\n:CNI-A - [0:0]\n-A POSTROUTING -j FIRST\n-A POSTROUTING -s 10.0.0.2/32 -j CNI-A\n-A POSTROUTING -j LAST\n-A CNI-A -d 10.0.0.0/20 -j ACCEPT\n-A CNI-A -j MASQUERADE\n',
        ':POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -j FIRST\n-A POSTROUTING -j LAST\n',
        ['POSTROUTING', 'CNI-A'],
      ),
    ).toBe(
      '*nat\n-N CNI-A\n-I POSTROUTING 2 -s 10.0.0.2/32 -j CNI-A\n-A CNI-A -d 10.0.0.0/20 -j ACCEPT\n-A CNI-A -j MASQUERADE\nCOMMIT\n',
    );
  });

  it('counts copies of the same rule', () => {
    expect(
      undo(':X - [0:0]\n-A X -j A\n-A X -j A\n', ':X - [0:0]\n-A X -j A\n-A X -j A\n-A X -j A\n', [
        'X',
      ]),
    ).toBe('*nat\n-D X -j A\nCOMMIT\n');
    expect(
      undo(':X - [0:0]\n-A X -j A\n-A X -j B\n-A X -j A\n', ':X - [0:0]\n-A X -j B\n', ['X']),
    ).toBe('*nat\n-I X 1 -j A\n-I X 3 -j A\nCOMMIT\n');
  });

  it('changes nothing outside the touched chains, and nothing when nothing changed', () => {
    const before = ':X - [0:0]\n:Y - [0:0]\n-A X -j A\n';
    expect(undo(before, ':X - [0:0]\n:Y - [0:0]\n-A X -j A\n-A Y -j B\n', ['X'])).toBe('');
    expect(undo(before, before, ['X', 'Y'])).toBe('');
  });
});
