// What `TestNetns.ruleset()` compares: iptables-save output made comparable between two moments.

/**
 * `iptables-save` text without its comment and blank lines, every counter zeroed, and without the
 * tables that hold nothing: only built-in chains with the ACCEPT policy and no rule. Under nf_tables a
 * table that any iptables command touched stays, empty, after its last rule went (and iptables
 * cannot delete it); it filters and translates nothing, so it is no state of the code under test.
 * Two results compare equal exactly when the rules, the chains and the policies are the same.
 */
export function comparableRuleset(saved: string): string {
  const out: string[] = [];
  let block: string[] | undefined;
  for (const raw of saved.split('\n')) {
    if (raw.startsWith('#') || raw.trim() === '') continue;
    const line = raw.replace(/\[\d+:\d+\]/, '[0:0]');
    if (line.startsWith('*')) block = [line];
    else if (block === undefined) out.push(line);
    else {
      block.push(line);
      if (line === 'COMMIT') {
        const empty = block.every(
          (l) => l.startsWith('*') || l === 'COMMIT' || / ACCEPT \[0:0\]$/.test(l),
        );
        if (!empty) out.push(...block);
        block = undefined;
      }
    }
  }
  if (block !== undefined) out.push(...block);
  return out.join('\n');
}
