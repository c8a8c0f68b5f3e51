/**
 * A plain table for people: columns padded to their widest cell and two spaces apart, the last
 * column unpadded, one line per row with a header first. (Hand-written: cli-table3 draws boxes
 * that scripts and `grep` then have to cut away, and the padding is all we need.)
 */
export function formatTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  return [header, ...rows]
    .map(
      (row) =>
        `${row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ')}\n`,
    )
    .join('');
}
