// glibc functions Node does not have, bound through koffi: posix_spawn's for @allocnet/spawn, the
// agent's flock(2) and datagram socket calls, iptables-node's netlink socket. koffi and libc are
// loaded once, on first use, so importing a module that needs one costs nothing until it is called.
import { createRequire } from 'node:module';
import type * as Koffi from 'koffi';

let loaded: { readonly koffi: typeof Koffi; readonly lib: Koffi.IKoffiLib } | undefined;

/** koffi and its handle on glibc, loaded on the first call; throws where either is missing. */
export function loadKoffiLibc(): { readonly koffi: typeof Koffi; readonly lib: Koffi.IKoffiLib } {
  if (loaded === undefined) {
    // koffi is CommonJS; `require` keeps loading it (and dlopen-ing libc) out of import time.
    const require = createRequire(import.meta.url);
    const koffi = require('koffi') as typeof Koffi;
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
