// go-cni as Nomad's client calls it, for the benchmarks: tools/gocni-driver's `serve` (one
// long-lived go-cni, as in Nomad's client) in a node namespace (`nsenter --net=`), one JSON
// request a line, answers matched by `seq`. Each answer's `ms` times the go-cni call alone,
// inside the driver: what Nomad's client pays.
//
// go-cni 1.1.7 cannot move libcni's result cache: it writes /var/lib/cni/results/<network>-<id>-
// <ifname> in the host's mount namespace. `removeLibcniCache` removes what the given ids left.
import { readdir, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { REPO } from './paths.js';
import { startLineServer } from './line-server.js';

/** The driver, built by set-up (`pnpm --filter @allocnet/gocni-driver build`). */
export const GOCNI_DRIVER = join(REPO, 'tools', 'gocni-driver', 'dist', 'gocni-driver');
/** libcni's result cache: go-cni cannot move it. */
export const LIBCNI_RESULTS = '/var/lib/cni/results';

/** One answer line of the driver. */
interface Answer {
  readonly ok: boolean;
  readonly ms?: number;
  readonly error?: string;
}

export interface GoCniOptions {
  /** The node namespace's path (`nsenter --net=`). */
  readonly node: string;
  readonly conflist: string;
  /** Plugin directories, comma-separated as the driver takes them. */
  readonly pluginDirs: string;
  /** Setup attempts (Nomad makes 3, 1-2 s apart); default 1: the first error is the answer. */
  readonly attempts?: number;
}

export interface GoCni {
  /** One Setup or Remove; each [host, container] is mapped for tcp and udp. Resolves to go-cni's ms. */
  call(
    op: 'setup' | 'remove',
    id: string,
    netns: string,
    ports: readonly (readonly [number, number])[],
  ): Promise<number>;
  /** Ends its input; it answers what is under way, then exits. */
  stop(): Promise<void>;
}

/** Starts `gocni-driver serve` in the node namespace. */
export function startGoCni(o: GoCniOptions): GoCni {
  const server = startLineServer('gocni-driver serve', [
    'nsenter', `--net=${o.node}`, '--', GOCNI_DRIVER, 'serve',
    '--conflist', o.conflist, '--plugin-dir', o.pluginDirs, '--attempts', String(o.attempts ?? 1),
  ]); // prettier-ignore
  return {
    async call(op, id, netns, ports) {
      const answer = (await server.request({ op, id, netns, ports })) as Partial<Answer>;
      if (answer.ok !== true || answer.ms === undefined)
        throw new Error(
          `go-cni ${op} of ${JSON.stringify(id)} failed: ${answer.error ?? 'no time'}`,
        );
      return answer.ms;
    },
    async stop() {
      await server.stop();
    },
  };
}

/**
 * Removes the libcni cache files the given container ids left under /var/lib/cni/results, and
 * the directories when they were not there before (`hadDirs` false) and are empty now.
 */
export async function removeLibcniCache(ids: ReadonlySet<string>, hadDirs: boolean): Promise<void> {
  const files = await readdir(LIBCNI_RESULTS).catch((error: unknown) => {
    // No results directory: go-cni left nothing.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [] as string[];
    throw error;
  });
  const ours = files.filter((f) => [...ids].some((id) => f.includes(`-${id}-`)));
  await Promise.all(ours.map((f) => rm(join(LIBCNI_RESULTS, f), { force: true })));
  if (hadDirs) return;
  for (const dir of [LIBCNI_RESULTS, '/var/lib/cni'])
    await rmdir(dir).catch((error: unknown) => {
      // Not there, or someone else's files in it: not ours to remove.
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTEMPTY') throw error;
    });
}
