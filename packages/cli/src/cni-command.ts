// `allocnet cni …`: the flags and help of the cnitool of allocnet; what the commands run is in
// cni-run.ts, loaded by their actions.
import { Command, Option } from 'commander';
import { DEFAULT_CACHE_DIR, DEFAULT_CONF_DIR, DEFAULT_PLUGIN_DIRS } from '@allocnet/cni/defaults';
import type { AttachOptions, CommonOptions } from './cni-run.js';
import type { CliIo } from './io.js';

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
  const run = () => import('./cni-run.js');

  attachCommand(cni, 'add', 'attach a container to a network; prints the result JSON').action(
    async (name: string, netns: string, options: AttachOptions) => {
      await (await run()).runVerb('add', name, netns, options, io);
    },
  );
  attachCommand(cni, 'check', 'check an attachment made by add').action(
    async (name: string, netns: string, options: AttachOptions) => {
      await (await run()).runVerb('check', name, netns, options, io);
    },
  );
  attachCommand(
    cni,
    'del',
    'detach a container from a network (also when its netns is gone)',
  ).action(async (name: string, netns: string, options: AttachOptions) => {
    await (await run()).runVerb('del', name, netns, options, io);
  });

  commonOptions(
    cni
      .command('version')
      .description("each plugin's supported versions, and the version the network runs at")
      .argument('<network>', 'the network name'),
  ).action(async (name: string, options: CommonOptions) => {
    await (await run()).printVersions(name, options, io);
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
      await (await run()).printNetworks(options, io);
    });

  return cni;
}
