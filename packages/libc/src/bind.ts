// glibc functions Node does not have, bound through koffi: posix_spawn's for @allocnet/spawn, the
// agent's flock(2) and datagram socket calls, iptables-node's netlink socket. koffi and libc are
// loaded once, on first use, so importing a module that needs one costs nothing until it is called.
import { createRequire } from 'node:module';
import type * as Koffi from 'koffi';

let loaded: { readonly koffi: typeof Koffi; readonly lib: Koffi.IKoffiLib } | undefined;

/**
 * koffi's native module itself where koffi 2 puts this platform's build (and of koffi's own
 * version); else koffi's entry, which finds it wherever it is (musl, ARM's float ABIs). The entry
 * also loads Node's https, zlib and crypto for koffi's download tooling: about 11 ms of every
 * command's start that binds libc (docs/spawn.md), for nothing these bindings use (`load`,
 * `errno`, a library's `func` are the native module's own).
 */
function requireKoffi(require: NodeJS.Require): typeof Koffi {
  try {
    const native = require(
      `koffi/build/koffi/${process.platform}_${process.arch}/koffi.node`,
    ) as typeof Koffi & { readonly version?: unknown };
    const { version } = require('koffi/package.json') as { readonly version?: unknown };
    if (native.version === version) return native;
  } catch {
    // Not there, or not loadable here: the entry looks further.
  }
  return require('koffi') as typeof Koffi;
}

/** koffi and its handle on glibc, loaded on the first call; throws where either is missing. */
export function loadKoffiLibc(): { readonly koffi: typeof Koffi; readonly lib: Koffi.IKoffiLib } {
  if (loaded === undefined) {
    // koffi is CommonJS; `require` keeps loading it (and dlopen-ing libc) out of import time.
    const koffi = requireKoffi(createRequire(import.meta.url));
    loaded = { koffi, lib: koffi.load('libc.so.6') };
  }
  return loaded;
}

/**
 * Binds each signature's function once (a C prototype, e.g. `int flock(int fd, int op)`); the
 * caller's type is the contract, koffi checks each call's arguments against the prototype.
 */
export function bindLibc<T extends Record<string, unknown>>(signatures: {
  readonly [K in keyof T]: string;
}): () => T & { readonly errno: () => number } {
  let bound: (T & { readonly errno: () => number }) | undefined;
  return () => {
    if (bound === undefined) {
      const { koffi, lib } = loadKoffiLibc();
      const fns: Record<string, unknown> = { errno: () => koffi.errno() };
      for (const [name, signature] of Object.entries(signatures)) fns[name] = lib.func(signature);
      bound = fns as T & { readonly errno: () => number };
    }
    return bound;
  };
}
