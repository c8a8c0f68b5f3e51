// Setup: decode the request, make sure of the host prerequisites, ADD with Nomad's retry, pick the
// address; after a failed setup, the teardown's sweep (teardown.ts) removes what the attempts left.
// Also `ensureHostPrerequisites`, which reconcilers call.
//
// Concurrency: setups of different allocations run in parallel. The only waits are the
// first-setup gates (gates.ts): while the bridge, or a family's firewall or portmap chains, have
// never been set up by this process, setups that need them run one at a time, host prerequisites
// and ADD included; the first success warms the gate, and setups that find every gate they need
// warm wait on nothing (no global lock). `prepared` (the shared chains and admin rules this
// process has made sure of) is read and written without a lock: mostly under a cold gate, but a
// setup whose gates are warm may still prepare a chain they do not cover (portmap's, for a setup
// without ports) alongside another; both then find it missing and `ensureHostState` (host.ts)
// tolerates the lost race. The runner never runs two operations on one allocation at once, so an
// allocation's ADDs, DELs between attempts and sweep after a failure never overlap.
import pRetry, { AbortError } from 'p-retry';
import { kindOf } from '@allocnet/base';
import { isCniError } from '@allocnet/cni';
import type { Attachment, CniResult, NetworkConfig } from '@allocnet/cni';
import { NO_ADDRESS, dnsOf, pickAddress, resultAddresses } from './address.js';
import { cniArgs } from './args.js';
import { callOf, cniAttachment } from './context.js';
import type { ConfiguratorContext } from './context.js';
import { ConfiguratorError, invalidField, isConfiguratorError, messageOf } from './errors.js';
import type { NetworkFacts } from './facts.js';
import { createGates } from './gates.js';
import { ensureHostState, sharedChains } from './host.js';
import type { AdminRule, SharedChain } from './host.js';
import type { DefaultNetworkSettings } from './networks.js';
import { nativeDel } from './native-del.js';
import { nativeMasquerade } from './native-masq.js';
import { resolveNetwork } from './networks.js';
import { portMappings } from './ports.js';
import { decodeSpec } from './spec.js';
import { sweepAfterFailure } from './teardown.js';
import type { AllocAttachment, CniConfigurator } from './types.js';

/** CNI error codes that another attempt cannot fix. */
const FINAL_CNI_CODES = new Set([
  'invalid-argument',
  'invalid-config',
  'network-not-found',
  'plugin-not-found',
  'no-common-version',
  'incompatible-version',
  'invalid-network-config',
  'decode-failure',
  'unsupported-field',
  'spawn',
  'aborted',
]);

function checkNetnsPath(netns: unknown): string {
  if (typeof netns !== 'string' || netns === '') throw invalidField('netns', 'is empty');
  if (!netns.startsWith('/'))
    throw invalidField('netns', `${JSON.stringify(netns)} is not an absolute path`);
  if (netns.length > 4096 || netns.includes('\0') || /\/\.\.?(\/|$)/.test(netns))
    throw invalidField(
      'netns',
      `${JSON.stringify(netns.slice(0, 80))} is not a clean absolute path`,
    );
  return netns;
}

/** The default network's `-A <admin chain> -o <bridge> -d <subnet> -j ACCEPT`, per family. */
function adminRules(settings: DefaultNetworkSettings): AdminRule[] {
  const rules: AdminRule[] = [
    {
      family: 'ipv4',
      chain: settings.adminChain,
      bridge: settings.bridge,
      subnet: settings.subnet,
    },
  ];
  if (settings.ipv6Subnet !== undefined)
    rules.push({
      family: 'ipv6',
      chain: settings.adminChain,
      bridge: settings.bridge,
      subnet: settings.ipv6Subnet,
    });
  return rules;
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

/** A failed setup as the caller sees it: the first error, with what was being done and how often. */
function failure(
  error: unknown,
  context: { allocId: string; network: string; attempts: number },
): ConfiguratorError {
  if (isConfiguratorError(error)) return error;
  const where = `setting up ${JSON.stringify(context.allocId)} in network ${JSON.stringify(context.network)}`;
  // The CNI runtime's and iptables' own kinds; an AbortSignal's reason is a DOMException.
  const aborted =
    kindOf(error) === 'aborted' || (error instanceof Error && error.name === 'AbortError');
  const unavailable = kindOf(error) === 'unavailable';
  const tries =
    context.attempts === 0
      ? 'before the first ADD (host prerequisites)'
      : `after ${context.attempts} attempt${context.attempts === 1 ? '' : 's'}`;
  return new ConfiguratorError(
    aborted
      ? `${where} was cancelled: ${messageOf(error)}`
      : `${where} failed ${tries}: ${messageOf(error)}`,
    {
      code: aborted ? 'aborted' : unavailable ? 'unavailable' : 'setup-failed',
      allocId: context.allocId,
      network: context.network,
      attempts: context.attempts,
      cause: error,
    },
  );
}

export function createSetup(
  ctx: ConfiguratorContext,
): Pick<CniConfigurator, 'setup' | 'ensureHostPrerequisites'> {
  const { runtime, iptables, logger, settings } = ctx;
  const gates = createGates();
  // Shared chains and admin rules this process has made sure of, by `family:table:chain`.
  const prepared = new Set<string>();

  /** Shared chains (and, for the default network, the admin rules) this process has not made sure of. */
  async function prepareHost(
    facts: NetworkFacts,
    isDefault: boolean,
    call: { signal?: AbortSignal },
  ) {
    const chainKey = (c: SharedChain) => `${c.family}:${c.table}:${c.chain}`;
    const ruleKey = (r: AdminRule) => `${r.family}:rule:${r.chain}:${r.bridge}:${r.subnet}`;
    const chains = sharedChains(facts).filter((c) => !prepared.has(chainKey(c)));
    const rules = isDefault ? adminRules(settings).filter((r) => !prepared.has(ruleKey(r))) : [];
    if (isDefault)
      for (const r of rules)
        if (!chains.some((c) => c.family === r.family && c.chain === r.chain))
          chains.push({ family: r.family, table: 'filter', chain: r.chain });
    const families = [...new Set([...chains.map((c) => c.family), ...rules.map((r) => r.family)])];
    await Promise.all(
      families.map(async (family) => {
        const made = await ensureHostState(
          iptables[family],
          chains.filter((c) => c.family === family),
          rules.filter((r) => r.family === family),
          logger,
          call,
        );
        if (made.chains.length > 0 || made.rules.length > 0)
          logger.debug('host prerequisites created', {
            family,
            chains: made.chains.map((c) => c.chain),
            rules: made.rules.length,
          });
      }),
    );
    chains.forEach((c) => prepared.add(chainKey(c)));
    rules.forEach((r) => prepared.add(ruleKey(r)));
  }

  /** ADD with Nomad's retry: `attemptsMax` tries, a DEL and 1 s + 0–999 ms between them. */
  async function addWithRetry(
    network: NetworkConfig,
    attachment: Attachment,
    call: { signal?: AbortSignal },
  ): Promise<{ result: CniResult; attempts: number }> {
    const { attemptsMax, delayMs, jitterMs, random, sleep } = ctx.retry;
    const allocId = attachment.containerId;
    // The masquerade is written beside the chain (native-masq.ts) once the main plugin answered.
    const masq = nativeMasquerade(ctx, network, allocId);
    let attempts = 0;
    let first: unknown;
    try {
      const added = await pRetry(
        async () => {
          attempts++;
          let told: CniResult | undefined;
          let writing: Promise<void> | undefined;
          const onPluginResult = (type: string, result: CniResult) => {
            if (masq === undefined || type !== masq.mainType || writing !== undefined) return;
            told = result;
            writing = masq.write(result, call);
            // Awaited below; a failure must not count as unhandled meanwhile.
            writing.catch(() => undefined);
          };
          // What was written goes with the attempt: the chain's undo does not un-masquerade.
          const unwrite = async () => {
            if (writing === undefined || told === undefined) return;
            await writing.catch(() => undefined);
            await nativeDel(ctx, network, { allocId, addresses: resultAddresses(told) })?.remove(
              call,
            );
          };
          try {
            const done = await runtime.add(masq?.network ?? network, attachment, {
              ...call,
              onPluginResult,
            });
            try {
              await writing;
            } catch (error) {
              // The chain stands without its masquerade: undo it all; another attempt would
              // write the same rules the same way.
              logger.warn('writing the masquerade failed; undoing the ADD', {
                allocId,
                error: messageOf(error),
              });
              try {
                await runtime.del(network, attachment, call);
              } catch (delError) {
                logger.warn('DEL after the masquerade failed failed too', {
                  allocId,
                  error: messageOf(delError),
                });
              }
              await unwrite();
              throw new AbortError(error instanceof Error ? error : new Error(messageOf(error)));
            }
            return done;
          } catch (error) {
            if (error instanceof AbortError) {
              first ??= error.originalError;
              throw error;
            }
            await unwrite();
            first ??= error;
            const final =
              !isCniError(error) ||
              FINAL_CNI_CODES.has(error.code) ||
              call.signal?.aborted === true;
            if (final)
              throw new AbortError(error instanceof Error ? error : new Error(messageOf(error)));
            throw error;
          }
        },
        {
          retries: attemptsMax - 1,
          minTimeout: 0,
          maxTimeout: 0,
          factor: 1,
          ...call,
          onFailedAttempt: async ({ error, attemptNumber, retriesLeft }) => {
            if (retriesLeft <= 0) return;
            logger.warn('setup attempt failed; retrying', {
              allocId: attachment.containerId,
              network: network.name,
              attempt: attemptNumber,
              error: error.message,
            });
            try {
              await runtime.del(network, attachment, call);
            } catch (delError) {
              logger.warn('DEL between setup attempts failed', {
                allocId: attachment.containerId,
                error: messageOf(delError),
              });
            }
            await sleep(delayMs + Math.floor(random() * jitterMs), call.signal);
          },
        },
      );
      return { result: added.result, attempts };
    } catch (error) {
      throw failure(first ?? error, {
        allocId: attachment.containerId,
        network: network.name,
        attempts,
      });
    }
  }

  return {
    async setup(specInput, netnsInput, opts) {
      const spec = decodeSpec(specInput);
      const netns = checkNetnsPath(netnsInput);
      const call = callOf(opts);
      const snapshot = await ctx.catalog.current();
      const network = resolveNetwork(snapshot, spec.network);
      const facts = ctx.factsOf(network);
      const mappings = portMappings(spec, ctx.ignoreHostIps);
      // Everything of the record but the addresses, which the result gives.
      const recorded = {
        allocId: spec.allocId,
        network: { name: network.name, config: network.bytes },
        netns,
        ifName: spec.ifName ?? ctx.ifName,
        args: cniArgs(spec, ctx.region),
        portMappings: mappings,
      };
      const attachment = cniAttachment(recorded);
      const began = performance.now();
      let added: { result: CniResult; attempts: number };
      try {
        added = await gates.run(gateKeys(facts, mappings.length > 0), async () => {
          await prepareHost(facts, network === snapshot.defaultNetwork, call);
          return addWithRetry(network, attachment, call);
        });
      } catch (error) {
        const failed = failure(error, {
          allocId: spec.allocId,
          network: network.name,
          attempts: 0,
        });
        if (failed.code !== 'invalid-argument')
          await sweepAfterFailure(ctx, spec.allocId, network, []);
        throw failed;
      }
      const addresses = resultAddresses(added.result);
      const record: AllocAttachment = { ...recorded, addresses, result: added.result };
      const picked = pickAddress(added.result);
      if (picked === undefined) {
        try {
          await runtime.del(network, attachment);
        } catch (error) {
          logger.warn('DEL after a result without an address failed', {
            allocId: spec.allocId,
            error: messageOf(error),
          });
        }
        await sweepAfterFailure(ctx, spec.allocId, network, addresses);
        throw new ConfiguratorError(
          `setting up ${JSON.stringify(spec.allocId)} in network ${JSON.stringify(network.name)} failed: ${NO_ADDRESS}`,
          {
            code: 'setup-failed',
            allocId: spec.allocId,
            network: network.name,
            attempts: added.attempts,
          },
        );
      }
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
          dns: dnsOf(added.result),
          portMappings: mappings,
          attempts: added.attempts,
        },
        attachment: record,
      };
    },

    async ensureHostPrerequisites(opts) {
      const call = callOf(opts);
      const rules = adminRules(settings);
      await Promise.all(
        [...new Set(rules.map((r) => r.family))].map((family) =>
          ensureHostState(
            iptables[family],
            [{ family, table: 'filter', chain: settings.adminChain }],
            rules.filter((r) => r.family === family),
            logger,
            call,
          ),
        ),
      );
    },
  };
}
