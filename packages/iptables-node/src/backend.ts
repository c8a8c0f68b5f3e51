// Which backend the `iptables` a command runs uses, told by the binary its links end at, without
// running it: Debian, Fedora and Alpine install iptables 1.8's two multi-call binaries,
// xtables-nft-multi and xtables-legacy-multi, and make `iptables` and `ip6tables` links (through
// the alternatives system) to one of them; each binary always uses its own backend, whatever
// name it is run by. Anything else (a wrapper script, iptables before 1.8) is not told here, and
// `iptables --version` says (iptables.ts): that exec costs a cold command some 8 ms of its main
// thread (a CPU profile of `allocnet leaks --reap --local`).
import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';

/**
 * Whether `name`, found in `path` as execvp finds it (the first regular, executable file), is
 * iptables-nft (true) or iptables-legacy (false); undefined when `path` is unset, nothing is
 * found, or what is found is neither multi-call binary.
 */
export function nfTablesByLink(name: string, path: string | undefined): boolean | undefined {
  if (path === undefined) return undefined;
  for (const dir of path.split(':')) {
    const candidate = join(dir === '' ? '.' : dir, name);
    try {
      if (!statSync(candidate).isFile()) continue;
      accessSync(candidate, constants.X_OK);
    } catch {
      continue;
    }
    try {
      const binary = basename(realpathSync(candidate));
      if (binary === 'xtables-nft-multi') return true;
      if (binary === 'xtables-legacy-multi') return false;
    } catch {
      // A link that went away between the two looks: let the command say.
    }
    return undefined;
  }
  return undefined;
}
