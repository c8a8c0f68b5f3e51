// The addresses this process's setups picked for host-local (native-pick.ts) and hold until their
// attempt ended (add.ts): the search passes over them, and a write for one of them waits for that
// end (`free`). Kept apart from native-pick.ts so that the configurator's context holds one
// without importing the search.

/**
 * Addresses picked by this process's setups whose attempt has not ended: per host-local directory
 * (the search passes over them), and by address, with the ends of those attempts (`free`).
 */
export class AddressPicks {
  private readonly dirs = new Map<string, Set<string>>();
  private readonly holders = new Map<string, Set<Holder>>();

  /** The addresses picked in `dir`. */
  busy(dir: string): ReadonlySet<string> {
    return this.dirs.get(dir) ?? new Set();
  }

  /** Takes `address` of `dir` for `holder` until `release`. */
  hold(holder: Holder, dir: string, address: string): void {
    let busy = this.dirs.get(dir);
    if (busy === undefined) this.dirs.set(dir, (busy = new Set()));
    busy.add(address);
    let holding = this.holders.get(address);
    if (holding === undefined) this.holders.set(address, (holding = new Set()));
    holding.add(holder);
  }

  /** Lets every address `holder` took go, and tells those waiting for them (`free`). */
  release(holder: Holder): void {
    for (const { dir, address } of holder.taken) {
      this.dirs.get(dir)?.delete(address);
      const holding = this.holders.get(address);
      holding?.delete(holder);
      if (holding?.size === 0) this.holders.delete(address);
    }
    holder.end();
  }

  /**
   * Resolves once no attempt but `own` holds any of `addresses`: a setup whose address host-local
   * chose (or was asked for by the allocation) may have been given one that another setup picked
   * and wrote rules for while its ADD ran (its host-local then refuses it, and its attempt
   * removes those rules). Writing its own before that removal, it would find them present, skip
   * its firewall accepts, and lose them to it (add.ts).
   */
  async free(addresses: readonly string[], own?: Holder): Promise<void> {
    for (const address of addresses)
      for (;;) {
        const other = [...(this.holders.get(address) ?? [])].find((h) => h !== own);
        if (other === undefined) break;
        await other.ended;
      }
  }
}

/** One attempt's picks: what it took, and its end (`AddressPicks.release`). */
export interface Holder {
  readonly taken: readonly { readonly dir: string; readonly address: string }[];
  readonly ended: Promise<void>;
  readonly end: () => void;
}

export function newHolder(): Holder & { taken: { dir: string; address: string }[] } {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => (end = resolve));
  return { taken: [], ended, end };
}
