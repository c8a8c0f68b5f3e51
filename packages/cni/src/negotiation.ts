// Version negotiation: each plugin binary's VERSION answer, cached per binary, and the version a
// chain runs at (the highest the configuration offers that every plugin supports; version.ts).
// The cache holds the promise, so concurrent calls that need one binary's answer share one
// VERSION process; an answer is kept while the file's mtime, size and inode stay the same, and a
// failed one is not kept.
import { statSync } from 'node:fs';
import * as t from 'io-ts';
import { offeredVersions } from './config.js';
import type { NetworkConfig } from './config.js';
import { decode } from './decode.js';
import { CniError, isCniError } from './errors.js';
import type { CallOptions, Invoker, Step } from './invoke.js';
import { oneLine } from './plugin-output.js';
import { SPEC_VERSION, isVersion, negotiateVersion } from './version.js';
import type { PluginVersions } from './version.js';

export interface NetworkVersions {
  /** The version the chain runs at, or undefined when no offered version suits every plugin. */
  readonly cniVersion: string | undefined;
  readonly offered: readonly string[];
  readonly plugins: readonly PluginVersions[];
}

export interface Negotiation {
  /** Each plugin's VERSION answer and the version the chain runs at, if any. */
  negotiate(
    network: NetworkConfig,
    steps: readonly Step[],
    call: CallOptions | undefined,
  ): Promise<NetworkVersions>;
  /** The version the chain runs at; `no-common-version` when there is none. */
  version(
    network: NetworkConfig,
    steps: readonly Step[],
    call: CallOptions | undefined,
  ): Promise<string>;
}

const VersionJson = t.intersection([
  t.type({ cniVersion: t.string }),
  t.partial({ supportedVersions: t.array(t.string) }),
]);

export function createNegotiation(invoker: Invoker): Negotiation {
  // VERSION answers per binary, valid while the file's mtime, size and inode stay the same.
  const versionCache = new Map<string, { stamp: string; versions: Promise<readonly string[]> }>();

  async function supportedVersions(
    step: Step,
    call: CallOptions | undefined,
  ): Promise<readonly string[]> {
    const info = statSync(step.path);
    const stamp = `${info.mtimeMs}:${info.size}:${info.ino}`;
    const hit = versionCache.get(step.path);
    if (hit?.stamp === stamp) return hit.versions;
    const versions = (async () => {
      const environment = invoker.env('VERSION', {
        containerId: '',
        netns: 'dummy',
        ifName: 'dummy',
        args: [],
      });
      let stdout: string;
      try {
        stdout = await invoker.run(
          step,
          'VERSION',
          JSON.stringify({ cniVersion: SPEC_VERSION }),
          environment,
          undefined,
          call,
        );
      } catch (error) {
        // Plugins older than VERSION answer "unknown CNI_COMMAND: VERSION": they speak 0.1.0 only.
        if (isCniError(error) && /unknown CNI_COMMAND: VERSION/.test(error.msg)) return ['0.1.0'];
        throw error;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(stdout);
      } catch {
        // Not JSON: read as no answer below, and the error quotes what the plugin printed.
        parsed = undefined;
      }
      const decoded = decode(VersionJson, parsed);
      const answer = decoded.ok ? decoded.value : undefined;
      const list =
        answer?.supportedVersions ??
        (answer?.cniVersion === '0.2.0' ? ['0.1.0', '0.2.0'] : undefined);
      if (list === undefined) {
        const msg = `VERSION answer is not {cniVersion, supportedVersions}: ${oneLine(stdout) || 'nothing'}`;
        throw new CniError(`plugin ${JSON.stringify(step.plugin.type)} failed (VERSION): ${msg}`, {
          code: 'invalid-result',
          msg,
          plugin: step.plugin.type,
          verb: 'VERSION',
        });
      }
      return list.filter(isVersion);
    })();
    versionCache.set(step.path, { stamp, versions });
    // A failed answer is not kept: the next call asks again.
    versions.catch(() => {
      if (versionCache.get(step.path)?.versions === versions) versionCache.delete(step.path);
    });
    return versions;
  }

  async function negotiate(
    network: NetworkConfig,
    steps: readonly Step[],
    call: CallOptions | undefined,
  ): Promise<NetworkVersions> {
    // Every binary is asked at once; most answers come from the cache anyway.
    const plugins: PluginVersions[] = await Promise.all(
      steps.map(async (step) => ({
        type: step.plugin.type,
        path: step.path,
        supportedVersions: await supportedVersions(step, call),
      })),
    );
    const offered = offeredVersions(network);
    return { cniVersion: negotiateVersion(offered, plugins), offered, plugins };
  }

  return {
    negotiate,
    async version(network, steps, call) {
      const negotiated = await negotiate(network, steps, call);
      if (negotiated.cniVersion !== undefined) return negotiated.cniVersion;
      const which = negotiated.plugins
        .map((p) => `${p.type} supports ${p.supportedVersions.join(', ')}`)
        .join('; ');
      const msg = `network ${JSON.stringify(network.name)} offers ${negotiated.offered.join(', ')}, and no one of them is supported by every plugin (${which})`;
      throw new CniError(msg, {
        code: 'no-common-version',
        specCode: 1,
        msg,
        network: network.name,
      });
    },
  };
}
