// The floor: a plain loop that spawns each plugin of a chain directly (node:child_process), stdin
// built by hand the way libcni builds it, each plugin's result as the next one's prevResult, the
// final result kept in memory for DEL. No checks, no cache, no retry, no audit: what any Node
// runtime must at least pay.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { NetworkConfig } from '@allocnet/cni';

export interface PlainAlloc {
  readonly id: string;
  readonly netns: string;
  readonly portMappings: readonly unknown[];
}

export interface PlainDriver {
  add(a: PlainAlloc): Promise<void>;
  /** CHECK over the chain without portmap (its CHECK is broken in 1.1.1, see docs/cni.md). */
  check(a: PlainAlloc): Promise<void>;
  del(a: PlainAlloc): Promise<void>;
}

function spawnPlugin(
  pluginDir: string,
  type: string,
  stdin: string,
  env: NodeJS.ProcessEnv,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(join(pluginDir, type), [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    child.on('error', reject);
    child.on('close', (code) => {
      const stdout = Buffer.concat(out).toString();
      if (code === 0) resolve(stdout);
      else reject(new Error(`${type} exited ${code}: ${stdout}${Buffer.concat(err).toString()}`));
    });
    child.stdin.end(stdin);
  });
}

export function plainDriver(net: NetworkConfig, pluginDir: string): PlainDriver {
  const results = new Map<string, unknown>();
  const env = (command: string, a: PlainAlloc): NodeJS.ProcessEnv => ({
    ...process.env,
    CNI_COMMAND: command,
    CNI_CONTAINERID: a.id,
    CNI_NETNS: a.netns,
    CNI_IFNAME: 'eth0',
    CNI_ARGS: '',
    CNI_PATH: pluginDir,
  });
  const stdin = (raw: Readonly<Record<string, unknown>>, a: PlainAlloc, prevResult: unknown) =>
    JSON.stringify({
      ...raw,
      name: net.name,
      cniVersion: net.cniVersion,
      ...(raw.type === 'portmap' ? { runtimeConfig: { portMappings: a.portMappings } } : {}),
      ...(prevResult === undefined ? {} : { prevResult }),
    });
  return {
    async add(a) {
      let prev: unknown;
      for (const plugin of net.plugins) {
        prev = JSON.parse(
          await spawnPlugin(pluginDir, plugin.type, stdin(plugin.raw, a, prev), env('ADD', a)),
        );
      }
      results.set(a.id, prev);
    },
    async check(a) {
      const prev = results.get(a.id);
      for (const plugin of net.plugins.filter((p) => p.type !== 'portmap'))
        await spawnPlugin(pluginDir, plugin.type, stdin(plugin.raw, a, prev), env('CHECK', a));
    },
    async del(a) {
      const prev = results.get(a.id);
      for (const plugin of [...net.plugins].reverse())
        await spawnPlugin(pluginDir, plugin.type, stdin(plugin.raw, a, prev), env('DEL', a));
      results.delete(a.id);
    },
  };
}
