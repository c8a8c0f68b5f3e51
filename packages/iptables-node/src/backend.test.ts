// nfTablesByLink over made-up PATH directories: links to the two multi-call binaries, a wrapper,
// a file execvp would pass over.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nfTablesByLink } from './backend.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'allocnet-backend-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A directory of PATH holding `files` (name to content, made executable unless said) and links. */
function pathDir(
  name: string,
  files: Record<string, string>,
  links: Record<string, string> = {},
  mode = 0o755,
): string {
  const at = join(dir, name);
  mkdirSync(at);
  for (const [file, content] of Object.entries(files)) {
    writeFileSync(join(at, file), content);
    chmodSync(join(at, file), mode);
  }
  for (const [link, target] of Object.entries(links)) symlinkSync(target, join(at, link));
  return at;
}

describe('nfTablesByLink', () => {
  it('tells iptables-nft and iptables-legacy by the multi-call binary the links end at', () => {
    const sbin = pathDir(
      'sbin',
      { 'xtables-nft-multi': '', 'xtables-legacy-multi': '' },
      { 'iptables-nft': 'xtables-nft-multi', 'ip6tables-legacy': 'xtables-legacy-multi' },
    );
    // Through an alternatives-like link of its own, as Debian's /etc/alternatives.
    const alternatives = pathDir(
      'alternatives',
      {},
      {
        iptables: join(sbin, 'iptables-nft'),
        ip6tables: join(sbin, 'ip6tables-legacy'),
      },
    );
    expect(nfTablesByLink('iptables', `/nonexistent:${alternatives}`)).toBe(true);
    expect(nfTablesByLink('ip6tables', alternatives)).toBe(false);
  });

  it('leaves the answer to the command for anything else, or no PATH', () => {
    const wrapper = pathDir('wrapper', { iptables: '#!/bin/sh\nexec iptables-nft "$@"\n' });
    expect(nfTablesByLink('iptables', wrapper)).toBeUndefined();
    expect(nfTablesByLink('iptables', undefined)).toBeUndefined();
    expect(nfTablesByLink('iptables', join(dir, 'missing'))).toBeUndefined();
  });

  it('passes over what execvp passes over: a file that is not executable', () => {
    const first = pathDir('first', { iptables: 'not a program' }, {}, 0o644);
    const second = pathDir(
      'second',
      { 'xtables-legacy-multi': '' },
      {
        iptables: 'xtables-legacy-multi',
      },
    );
    expect(nfTablesByLink('iptables', `${first}:${second}`)).toBe(false);
  });
});
