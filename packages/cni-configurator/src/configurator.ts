// The configurator's facade: one context (context.ts) shared by the operations, each written
// where its concern lives — setup.ts (setup, the first-setup gates; add.ts the ADD with retry,
// host.ts the host prerequisites), check.ts (CHECK), teardown.ts (DEL, the audit, forced cleanup), leaks.ts
// (find and reap), holds.ts (holding recorded addresses, reclaiming them). Only teardown.ts and leaks.ts use the sweep (sweep.ts).
import { createCheck } from './check.js';
import { createContext } from './context.js';
import { createRouteReader } from './route-reader.js';
import { holdAddresses } from './holds.js';
import { createLeaks } from './leaks.js';
import { requestedPortMappings } from './ports.js';
import { checkSpec, createSetup } from './setup.js';
import { decodeSpec } from './spec.js';
import { createTeardown } from './teardown.js';
import type { CniConfigurator, CniConfiguratorOptions } from './types.js';

/**
 * Creates the configurator: reads the conf dir (and starts watching it), checks the default
 * network's options. Nothing touches iptables or plugins until an operation runs.
 *
 * Concurrency: operations on different allocations run in parallel. The only waits are the
 * first-setup gates (see gates.ts, setup.ts): while the bridge, or a family's firewall or portmap
 * chains, have never been set up by this process, setups that need them run one at a time; and
 * the rooms (room.ts): in a host-local directory, reclaiming ADDs and other ADDs take turns.
 * Callers (the runner) never run two operations on one allocation at once.
 */
export async function createCniConfigurator(
  options: CniConfiguratorOptions,
): Promise<CniConfigurator> {
  const ctx = await createContext(options);
  return {
    catalog: () => ctx.catalog.view(),
    async reload() {
      await ctx.catalog.reload();
      return ctx.catalog.view();
    },
    portMappingsOf: (spec) => requestedPortMappings(decodeSpec(spec), ctx.ignoreHostIps),
    checkSpec(spec) {
      checkSpec(ctx, spec);
    },
    ...createSetup(ctx),
    // By default the node's links are read where its iptables are (node.ts does the same).
    ...createCheck(
      ctx,
      options.routeReader ??
        createRouteReader(
          ctx.iptables.ipv4.netns === undefined ? {} : { netns: ctx.iptables.ipv4.netns },
        ),
    ),
    ...createTeardown(ctx),
    ...createLeaks(ctx),
    holdAddresses: (attachments, opts) => holdAddresses(ctx, attachments, opts),
    close() {
      ctx.catalog.close();
      return Promise.resolve();
    },
  };
}
