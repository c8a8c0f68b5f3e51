// What `allocnet cni …` runs: the CNI runtime over this host's plugins. Loaded by the commands'
// actions only (cni-command.ts holds their flags and help).
import { createHash } from 'node:crypto';
import * as t from 'io-ts';
import { isRight } from 'fp-ts/lib/Either.js';
import {
  invalidArgument,
  createCniRuntime,
  createNodePluginExec,
  findNetwork,
  listNetworks,
  parseArgs,
} from '@allocnet/cni';
import type { Attachment, CniRuntime, CniError } from '@allocnet/cni';
import { hostNetnsOf, pluginDirsOf } from './host-options.js';
import type { CliIo } from './io.js';
import { formatTable } from './table.js';

export interface CommonOptions {
  readonly confDir: string;
  readonly pluginDir?: string[];
  readonly cacheDir: string;
  readonly hostNetns?: string;
}

export interface AttachOptions extends CommonOptions {
  readonly id?: string;
  readonly ifname: string;
  readonly capArgs?: string;
  readonly args?: string;
}

function usage(flag: string, problem: string): CniError {
  return invalidArgument(flag, problem);
}

/** `--cap-args` is a JSON object of capability names to values. */
export function parseCapArgs(text: string | undefined): Record<string, unknown> {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw usage('--cap-args', `is not JSON: ${(error as Error).message}`);
  }
  const decoded = t.record(t.string, t.unknown).decode(value);
  if (!isRight(decoded) || Array.isArray(value)) {
    throw usage(
      '--cap-args',
      `should be a JSON object of capability names to values, got ${JSON.stringify(value)}`,
    );
  }
  return decoded.right;
}

/** Without `--id`, the id is derived from the netns path, so add and del of one path agree. */
export function defaultContainerId(netns: string): string {
  return `cni-${createHash('sha512').update(netns).digest('hex').slice(0, 16)}`;
}

/** The runtime of a command; a bad `--host-netns` is refused here, before anything runs. */
function runtimeOf(options: CommonOptions, io: CliIo): CniRuntime {
  const netns = hostNetnsOf(options.hostNetns);
  return createCniRuntime({
    pluginDirs: pluginDirsOf(options.pluginDir, io),
    cacheDir: options.cacheDir,
    exec: createNodePluginExec(netns === undefined ? {} : { netns: netns.name }),
  });
}

function attachment(netns: string, options: AttachOptions): Attachment {
  return {
    containerId: options.id ?? defaultContainerId(netns),
    netns,
    ifName: options.ifname,
    args: options.args === undefined ? [] : parseArgs(options.args, '--args'),
    capabilityArgs: parseCapArgs(options.capArgs),
  };
}

/** `cni add|check|del <network> <netns>`: one verb on one attachment; add prints the result. */
export async function runVerb(
  verb: 'add' | 'check' | 'del',
  name: string,
  netns: string,
  options: AttachOptions,
  io: CliIo,
): Promise<void> {
  const runtime = runtimeOf(options, io);
  const network = await findNetwork(options.confDir, name);
  if (verb === 'add') {
    const added = await runtime.add(network, attachment(netns, options));
    io.stdout.write(`${JSON.stringify(added.json, null, 2)}\n`);
  } else if (verb === 'check') {
    const checked = await runtime.check(network, attachment(netns, options));
    if (!checked.ran)
      io.stderr.write(`network ${JSON.stringify(name)} has disableCheck: nothing was checked\n`);
  } else await runtime.del(network, attachment(netns, options));
}

/** `cni version <network>`: each plugin's versions and the network's. */
export async function printVersions(name: string, options: CommonOptions, io: CliIo) {
  const runtime = runtimeOf(options, io);
  const network = await findNetwork(options.confDir, name);
  const versions = await runtime.versions(network);
  io.stdout.write(`${JSON.stringify(versions, null, 2)}\n`);
}

/** `cni list`: the networks of a configuration directory, and the files that are not. */
export async function printNetworks(options: { confDir: string; json?: boolean }, io: CliIo) {
  const listing = await listNetworks(options.confDir);
  if (options.json === true) {
    io.stdout.write(
      `${JSON.stringify(
        {
          networks: listing.networks.map((n) => ({
            name: n.name,
            file: n.source,
            cniVersion: n.cniVersion,
            cniVersions: n.cniVersions,
            plugins: n.plugins.map((p) => p.type),
          })),
          invalid: listing.invalid.map((i) => ({ file: i.file, error: i.error.message })),
        },
        null,
        2,
      )}\n`,
    );
    return;
  }
  if (listing.networks.length === 0 && listing.invalid.length === 0) {
    io.stdout.write(`no network configurations in ${options.confDir}\n`);
    return;
  }
  const rows = listing.networks.map((n) => [
    n.name,
    [...new Set([...(n.cniVersion === undefined ? [] : [n.cniVersion]), ...n.cniVersions])].join(
      ',',
    ),
    n.plugins.map((p) => p.type).join(','),
    n.source ?? '',
  ]);
  io.stdout.write(formatTable(['NETWORK', 'VERSIONS', 'PLUGINS', 'FILE'], rows));
  for (const bad of listing.invalid) io.stdout.write(`invalid: ${bad.error.message}\n`);
}
