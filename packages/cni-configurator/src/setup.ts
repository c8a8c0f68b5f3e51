// Setup: decode the request, make sure of the host prerequisites (host.ts), ADD with Nomad's retry
// (add.ts), pick the address; after a failed setup, the teardown's sweep (teardown.ts) removes
// what the attempts left.
//
// Concurrency: setups of different allocations run in parallel. The only waits are the
// first-setup gates (gates.ts): while the bridge, or a family's firewall or portmap chains, have
// never been set up by this process, setups that need them run one at a time, host prerequisites
// and ADD included; the first success warms the gate, and setups that find every gate they need
// warm wait on nothing (no global lock). What the host preparer has made sure of (host.ts) is
// read and written without a lock: mostly under a cold gate, but a setup whose gates are warm may
// still prepare a chain they do not cover (portmap's, for a setup without ports) alongside
// another; both then find it missing and `ensureHostState` (host.ts) tolerates the lost race. The
// runner never runs two operations on one allocation at once, so an allocation's ADDs, DELs
// between attempts and sweep after a failure never overlap. In a network that uses host-local,
// the ADD with retry runs in the directory's room (room.ts): as `new`, or as `reclaim` for a
// setup that re-claims recorded addresses (holds.ts); without reclaims the room admits at once.
// An IPv4-only network's interface is left without IPv6 (ipv6-off.ts). Once a setup of this process
// made the bridge, the rules for picked addresses are written while the ADD runs (add.ts).
import { show } from '@allocnet/base';
import type { Attachment, CniResult, NetworkConfig } from '@allocnet/cni';
import { absolutePathProblem } from '@allocnet/netns';
import { addWithRetry, setupFailure } from './add.js';
import { NO_ADDRESS, dnsOf, pickAddress, resultAddresses } from './address.js';
import { cniArgs } from './args.js';
import { callOf, cniAttachment } from './context.js';
import type { ConfiguratorContext } from './context.js';
import { ConfiguratorError, invalidField, messageOf } from './errors.js';
import type { NetworkFacts } from './facts.js';
import { createGates } from './gates.js';
import { reclaimAdd } from './holds.js';
import type { Reclaim } from './holds.js';
import { createHostPreparer } from './host.js';
import { withIpv6Off } from './ipv6-off.js';
import { nativeParts, sharedRulesOf } from './native-add.js';
import type { Heal } from './native-add.js';
import { addressPicker } from './native-pick.js';
import { resolveNetwork } from './networks.js';
import type { CatalogSnapshot } from './networks.js';
import { portMappings } from './ports.js';
import { checkRequests, requestsOf } from './requests.js';
import { dropDefaultRoutes } from './routes.js';
import { decodeSpec } from './spec.js';
import { sweepAfterFailure } from './teardown.js';
import type { AllocAttachment, AllocNetworkSpec, CniConfigurator } from './types.js';

/** The ADD with retry in the room of the network's host-local directory, if it has one. */
async function addInRoom(
  ctx: ConfiguratorContext,
  network: NetworkConfig,
  facts: NetworkFacts,
  attachment: Attachment,
  call: { signal?: AbortSignal },
  reclaim: Reclaim | undefined,
  heal: Heal,
  bridgeUp: boolean,
): Promise<{ result: CniResult; attempts: number }> {
  if (reclaim !== undefined)
    return reclaimAdd(ctx, reclaim, call, (asking) =>
      addWithRetry(ctx, asking, attachment, call, heal),
    );
  if (facts.ipamDir === undefined) return addWithRetry(ctx, network, attachment, call, heal);
  const leave = await ctx.room(facts.ipamDir).enter('new', call.signal);
  try {
    const pick = addressPicker(network, attachment, ctx);
    return await addWithRetry(ctx, network, attachment, call, heal, pick, bridgeUp);
  } finally {
    leave();
  }
}

/** The namespace path a setup runs in: @allocnet/netns's clean absolute path. */
function checkNetnsPath(netns: unknown): string {
  if (typeof netns !== 'string' || netns === '') throw invalidField('netns', 'is empty');
  const problem = absolutePathProblem(netns);
  if (problem !== undefined) throw invalidField('netns', `${show(netns)} ${problem}`);
  return netns;
}

/** The first-setup gates a setup needs (gates.ts). */
function gateKeys(facts: NetworkFacts, hasPorts: boolean): string[] {
  const keys: string[] = [];
  if (facts.bridge !== undefined) keys.push(`bridge:${facts.bridge}`);
  else keys.push(`network:${facts.name}`);
  for (const family of facts.families) {
    if (facts.firewallAdminChain !== undefined) keys.push(`firewall:${family}`);
    if (facts.portmap !== undefined && hasPorts) keys.push(`portmap:${family}`);
  }
  return keys;
}

/**
 * After an ADD that succeeded but whose setup cannot end well (no address in the result, or the
 * default routes could not be deleted): DEL, then the sweep after a failure, then the error.
 */
async function undoAdd(
  ctx: ConfiguratorContext,
  network: NetworkConfig,
  attachment: Attachment,
  addresses: readonly string[],
  why: string,
  attempts: number,
  code: 'setup-failed' | 'aborted' = 'setup-failed',
): Promise<never> {
  const allocId = attachment.containerId;
  try {
    await ctx.runtime.del(network, attachment);
  } catch (error) {
    ctx.logger.warn('DEL after a setup that cannot end well failed', {
      allocId,
      error: messageOf(error),
    });
  }
  await sweepAfterFailure(ctx, allocId, network, addresses);
  throw new ConfiguratorError(
    `setting up ${JSON.stringify(allocId)} in network ${JSON.stringify(network.name)} failed: ${why}`,
    { code, allocId, network: network.name, attempts },
  );
}

/** The current catalog's network of `spec`, and its facts; refuses requests it cannot take. */
function networkOf(
  ctx: ConfiguratorContext,
  snapshot: CatalogSnapshot,
  spec: AllocNetworkSpec,
): { network: NetworkConfig; facts: NetworkFacts } {
  const network = resolveNetwork(snapshot, spec.network);
  const facts = ctx.factsOf(network);
  checkRequests(spec, network, facts);
  return { network, facts };
}

/**
 * `checkSpec`: the spec decoded, then checked against the catalog as last read. While the conf
 * dir is being re-read after a change, the catalog part is left to the setup (which reads the
 * new catalog): a network just added must not be refused, nor one just removed passed for sure.
 */
export function checkSpec(ctx: ConfiguratorContext, spec: AllocNetworkSpec): void {
  const valid = decodeSpec(spec);
  const { snapshot, stale } = ctx.catalog.latest();
  if (!stale) networkOf(ctx, snapshot, valid);
}

/** `setup`: the first-setup gates and the host preparer of this configurator, around `addWithRetry`. */
export function createSetup(ctx: ConfiguratorContext): Pick<CniConfigurator, 'setup'> {
  const { logger } = ctx;
  const gates = createGates();
  const prepareHost = createHostPreparer(ctx);

  return {
    async setup(specInput, netnsInput, opts) {
      const spec = decodeSpec(specInput);
      const netns = checkNetnsPath(netnsInput);
      const call = callOf(opts);
      const snapshot = await ctx.catalog.current();
      const { network, facts } = networkOf(ctx, snapshot, spec);
      const reclaiming = opts?.reclaim !== undefined && opts.reclaim.length > 0;
      const requests = requestsOf(spec, network, reclaiming);
      const mappings = portMappings(spec, ctx.ignoreHostIps);
      // Everything of the record but the addresses, which the result gives.
      const recorded = {
        allocId: spec.allocId,
        network: { name: network.name, config: network.bytes },
        netns,
        ifName: spec.ifName ?? ctx.ifName,
        args: cniArgs(spec, ctx.region),
        portMappings: mappings,
        ...(requests.requested === undefined ? {} : { requested: requests.requested }),
      };
      const attachment = cniAttachment(recorded);
      const reclaim: Reclaim | undefined =
        opts?.reclaim === undefined
          ? undefined
          : {
              allocId: spec.allocId,
              network,
              facts,
              addresses: opts.reclaim,
              userIp: spec.cniArgs?.IP,
            };
      const began = performance.now();
      let added: { result: CniResult; attempts: number };
      try {
        added = await gates.run(gateKeys(facts, mappings.length > 0), async () => {
          const shared = sharedRulesOf(nativeParts(network), facts.families, mappings.length > 0);
          const isDefault = network === snapshot.defaultNetwork;
          await prepareHost(facts, isDefault, call, shared);
          const heal: Heal = (c) => prepareHost(facts, isDefault, c, shared, true);
          const at = {
            netns,
            ifName: recorded.ifName,
            own: opts?.ownNamespace === true,
            log: { allocId: spec.allocId, network: network.name },
          };
          // A setup of this process made the bridge (its gate is warm).
          const bridgeUp = facts.bridge !== undefined && gates.isWarm(`bridge:${facts.bridge}`);
          const ipv6Off = facts.ipv4Only && !ctx.ipv6OnIpv4Interfaces;
          return withIpv6Off(ctx, at, ipv6Off, () =>
            addInRoom(ctx, requests.network, facts, attachment, call, reclaim, heal, bridgeUp),
          );
        });
      } catch (error) {
        const failed = setupFailure(error, {
          allocId: spec.allocId,
          network: network.name,
          attempts: 0,
        });
        if (failed.code !== 'invalid-argument')
          await sweepAfterFailure(ctx, spec.allocId, network, []);
        throw failed;
      }
      const addresses = resultAddresses(added.result);
      const picked = pickAddress(added.result);
      if (picked === undefined)
        return undoAdd(ctx, network, attachment, addresses, NO_ADDRESS, added.attempts);
      let result = added.result;
      if (spec.defaultRoute === false) {
        try {
          result = await dropDefaultRoutes(
            ctx,
            { network: network.name, allocId: spec.allocId, netns },
            recorded.ifName,
            result,
            call,
          );
        } catch (error) {
          const why = `deleting its default routes through ${JSON.stringify(recorded.ifName)} failed: ${messageOf(error)}`;
          const code = call.signal?.aborted === true ? 'aborted' : 'setup-failed';
          return undoAdd(ctx, network, attachment, addresses, why, added.attempts, code);
        }
      }
      const record: AllocAttachment = { ...recorded, addresses, result };
      logger.debug('allocation network set up', {
        allocId: spec.allocId,
        network: network.name,
        attempts: added.attempts,
        ms: Math.round(performance.now() - began),
      });
      return {
        status: {
          allocId: spec.allocId,
          network: network.name,
          interfaceName: picked.interfaceName,
          address: picked.address,
          addressIpv6: picked.addressIpv6,
          dns: dnsOf(result),
          portMappings: mappings,
          attempts: added.attempts,
        },
        attachment: record,
      };
    },
  };
}
