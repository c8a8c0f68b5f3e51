import { createHash } from 'node:crypto';
import { Command, Option } from 'commander';
import * as t from 'io-ts';
import { isRight } from 'fp-ts/lib/Either.js';
import {
  invalidArgument,
  DEFAULT_CACHE_DIR,
  DEFAULT_CONF_DIR,
  DEFAULT_PLUGIN_DIRS,
  createCniRuntime,
  createNodePluginExec,
  findNetwork,
  listNetworks,
  parseArgs,
} from '@allocnet/cni';
import type { Attachment, CniRuntime, NetworkConfig, CniError } from '@allocnet/cni';
import { hostNetnsOf, pluginDirsOf } from './host-options.js';
import type { CliIo } from './io.js';
import { formatTable } from './table.js';

interface CommonOptions {
  readonly confDir: string;
  readonly pluginDir?: string[];
  readonly cacheDir: string;
  readonly hostNetns?: string;
}

interface AttachOptions extends CommonOptions {
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

function commonOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--conf-dir <dir>', 'where network configurations are').default(DEFAULT_CONF_DIR),
    )
    .addOption(
      new Option(
        '--plugin-dir <dir>',
        `where plugins are; repeat for several, searched in order (default: $CNI_PATH, else ${DEFAULT_PLUGIN_DIRS.join(', ')})`,
      ).argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]),
    )
    .addOption(
      new Option('--cache-dir <dir>', 'the result cache (libcni layout)').default(
        DEFAULT_CACHE_DIR,
      ),
    )
    .addOption(
      new Option(
        '--host-netns <name>',
        'run the plugins inside this named network namespace (ip netns exec), e.g. a test node',
      ),
    );
}

function attachCommand(
  parent: Command,
  verb: 'add' | 'check' | 'del',
  description: string,
): Command {
  return commonOptions(
    parent
      .command(verb)
      .description(description)
      .argument('<network>', 'the network name, as in its configuration file')
      .argument('<netns>', "the container's network namespace path, e.g. /run/netns/c1")
      .option('--id <id>', 'the container id (default: derived from the netns path)')
      .option('--ifname <name>', 'the interface name inside the container', 'eth0')
      .option(
        '--cap-args <json>',
        'capability arguments as a JSON object, e.g. {"portMappings":[…]}',
      )
      .option('--args <K=V;…>', 'CNI_ARGS pairs (IgnoreUnknown=1 is added)'),
  );
}

/** `allocnet cni …`: the cnitool of allocnet, for operators debugging a network configuration by hand. */
export function cniCommand(io: CliIo): Command {
  const cni = new Command('cni').description(
    'run CNI networks by hand: add, check, del, version, list',
  );

  const load = async (name: string, options: CommonOptions): Promise<NetworkConfig> =>
    findNetwork(options.confDir, name);

  attachCommand(cni, 'add', 'attach a container to a network; prints the result JSON').action(
    async (name: string, netns: string, options: AttachOptions) => {
      const runtime = runtimeOf(options, io);
      const network = await load(name, options);
      const added = await runtime.add(network, attachment(netns, options));
      io.stdout.write(`${JSON.stringify(added.json, null, 2)}\n`);
    },
  );
  attachCommand(cni, 'check', 'check an attachment made by add').action(
    async (name: string, netns: string, options: AttachOptions) => {
      const runtime = runtimeOf(options, io);
      const network = await load(name, options);
      const checked = await runtime.check(network, attachment(netns, options));
      if (!checked.ran)
        io.stderr.write(`network ${JSON.stringify(name)} has disableCheck: nothing was checked\n`);
    },
  );
  attachCommand(
    cni,
    'del',
    'detach a container from a network (also when its netns is gone)',
  ).action(async (name: string, netns: string, options: AttachOptions) => {
    const runtime = runtimeOf(options, io);
    const network = await load(name, options);
    await runtime.del(network, attachment(netns, options));
  });

  commonOptions(
    cni
      .command('version')
      .description("each plugin's supported versions, and the version the network runs at")
      .argument('<network>', 'the network name'),
  ).action(async (name: string, options: CommonOptions) => {
    const runtime = runtimeOf(options, io);
    const network = await load(name, options);
    const versions = await runtime.versions(network);
    io.stdout.write(`${JSON.stringify(versions, null, 2)}\n`);
  });

  cni
    .command('list')
    .description(
      'every network in the configuration directory, and every file that is not one, with the reason',
    )
    .addOption(
      new Option('--conf-dir <dir>', 'where network configurations are').default(DEFAULT_CONF_DIR),
    )
    .option('--json', 'print JSON')
    .action(async (options: { confDir: string; json?: boolean }) => {
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
        [
          ...new Set([...(n.cniVersion === undefined ? [] : [n.cniVersion]), ...n.cniVersions]),
        ].join(','),
        n.plugins.map((p) => p.type).join(','),
        n.source ?? '',
      ]);
      io.stdout.write(formatTable(['NETWORK', 'VERSIONS', 'PLUGINS', 'FILE'], rows));
      for (const bad of listing.invalid) io.stdout.write(`invalid: ${bad.error.message}\n`);
    });

  return cni;
}
