/**
 * First-setup gates: the race at its root. On a fresh node the first ADDs create shared state —
 * the bridge, and iptables chains every allocation uses (the firewall plugin's CNI-FORWARD and
 * admin chain, portmap's CNI-HOSTPORT-* chains and their jump rules). Plugins create those with
 * check-then-create, and under iptables-nft two of them racing fail with "CHAIN_USER_ADD failed
 * (File exists)" (exit status 4; 5 in 120 trials of 8 concurrent first setups, docs/cni.md), or
 * insert the same jump rule twice.
 *
 * A gate per piece of shared state (`bridge:<name>`, `firewall:<family>`, `portmap:<family>`):
 * while a gate is cold, setups that need it run one at a time; the first one that succeeds
 * makes it warm, and from then on setups pass it without waiting. Setups that need only warm
 * gates never wait on anything, so allocations otherwise set up in parallel — there is no
 * global lock. Gates are taken in sorted order, so two setups never wait on each other.
 */
export interface Gates {
  /** Runs `fn` once every gate in `keys` is either warm or held by this call. */
  run<T>(keys: readonly string[], fn: () => Promise<T>): Promise<T>;
  isWarm(key: string): boolean;
}

export function createGates(): Gates {
  const warm = new Set<string>();
  // The tail of each gate's queue: a waiter chains on it and replaces it with its own release.
  const tails = new Map<string, Promise<void>>();

  async function acquire(key: string): Promise<() => void> {
    const previous = tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => mine);
    tails.set(key, tail);
    await previous;
    return () => {
      release();
      if (tails.get(key) === tail) tails.delete(key);
    };
  }

  return {
    isWarm: (key) => warm.has(key),
    async run(keys, fn) {
      const cold = [...new Set(keys)].filter((k) => !warm.has(k)).sort();
      if (cold.length === 0) return fn();
      const releases: (() => void)[] = [];
      try {
        for (const key of cold) releases.push(await acquire(key));
        const still = cold.filter((k) => !warm.has(k));
        if (still.length === 0) {
          // Someone warmed them while this call waited: go on in parallel with the others.
          for (const release of releases.splice(0)) release();
          return await fn();
        }
        const result = await fn();
        for (const key of still) warm.add(key);
        return result;
      } finally {
        for (const release of releases) release();
      }
    },
  };
}
