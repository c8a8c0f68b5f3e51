import { copyFile, chmod, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** How the fake plugin answers one verb. */
export interface FakeAnswer {
  readonly result?: Record<string, unknown>;
  readonly error?: { readonly code: number; readonly msg: string; readonly details?: string };
  readonly errorStream?: 'stdout' | 'stderr';
  readonly stdout?: string;
  readonly stderr?: string;
  readonly exitCode?: number;
  readonly delayMs?: number;
}

/** The fake plugin's debug file. */
export interface FakeDebug {
  readonly versions?: readonly string[];
  readonly ADD?: FakeAnswer;
  readonly DEL?: FakeAnswer;
  readonly CHECK?: FakeAnswer;
  readonly VERSION?: FakeAnswer;
  readonly STATUS?: FakeAnswer;
  readonly GC?: FakeAnswer;
}

/** One call the fake plugin recorded. */
export interface FakeCall {
  readonly command: string;
  readonly argv: readonly string[];
  /** The CNI_* entries of its raw environment, in order, duplicates kept. */
  readonly env: readonly string[];
  /** The name of every variable of its raw environment, in order, duplicates kept. */
  readonly envNames: readonly string[];
  readonly stdin: string;
  /** `net:[inode]` of the namespace it ran in. */
  readonly netns: string;
  readonly pid: number;
}

export interface FakePlugin {
  readonly type: string;
  readonly path: string;
  /** Replaces the debug file: how it answers from now on. */
  answer(debug: FakeDebug): Promise<void>;
  /** Every call so far, oldest first. */
  calls(): Promise<FakeCall[]>;
}

/** Where the fake plugin's source is, beside this module (src/ in tests, dist/ when built). */
export const FAKE_PLUGIN_SOURCE = fileURLToPath(new URL('./fake-plugin.mjs', import.meta.url));

/**
 * Installs the recording fake plugin as `<dir>/<type>` (a copy, mode 0755), answering as `debug`
 * says. It needs `node` on the PATH of the environment plugins get.
 */
export async function installFakePlugin(
  dir: string,
  type: string,
  debug: FakeDebug = {},
): Promise<FakePlugin> {
  const path = join(dir, type);
  await copyFile(FAKE_PLUGIN_SOURCE, path);
  await chmod(path, 0o755);
  const plugin: FakePlugin = {
    type,
    path,
    answer: (d) => writeFile(`${path}.debug.json`, JSON.stringify(d)),
    async calls() {
      let text: string;
      try {
        text = await readFile(`${path}.log.jsonl`, 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw error;
      }
      return text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as FakeCall);
    },
  };
  await plugin.answer(debug);
  return plugin;
}
export { tempDir } from './tmp.js';
export { mutateAt, pathsOf, propertyParameters, valueAt } from './properties.js';
export type { Mutation } from './properties.js';

export interface NomadBridgeOptions {
  /** host-local's data directory: give each test its own. */
  readonly ipamDir: string;
  readonly cniVersion?: string;
  /** Add an IPv6 range (fd00:a:b::/64) and route (::/0). */
  readonly ipv6?: boolean;
  /** Leave firewall out of the chain. */
  readonly withoutFirewall?: boolean;
}

/**
 * Nomad's default bridge network as Nomad writes it (loopback; bridge `nomad` with ipMasq,
 * isGateway, forceAddress, hairpinMode false and host-local on 172.26.64.0/20; firewall with admin
 * chain NOMAD-ADMIN; portmap with snat), as a configuration list object: the fixture tests and
 * benchmarks run the real plugins with.
 */
export function nomadBridgeConflist(options: NomadBridgeOptions): Record<string, unknown> {
  const ranges: unknown[][] = [[{ subnet: '172.26.64.0/20' }]];
  const routes: unknown[] = [{ dst: '0.0.0.0/0' }];
  if (options.ipv6 === true) {
    ranges.push([{ subnet: 'fd00:a:b::/64' }]);
    routes.push({ dst: '::/0' });
  }
  return {
    cniVersion: options.cniVersion ?? '1.0.0',
    name: 'nomad',
    plugins: [
      { type: 'loopback' },
      {
        type: 'bridge',
        bridge: 'nomad',
        ipMasq: true,
        isGateway: true,
        forceAddress: true,
        hairpinMode: false,
        ipam: { type: 'host-local', ranges, routes, dataDir: options.ipamDir },
      },
      ...(options.withoutFirewall === true
        ? []
        : [{ type: 'firewall', backend: 'iptables', iptablesAdminChainName: 'NOMAD-ADMIN' }]),
      { type: 'portmap', capabilities: { portMappings: true }, snat: true },
    ],
  };
}
