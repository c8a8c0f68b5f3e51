import pRetry, { AbortError } from 'p-retry';
import { isCniError, parseNetworkConfigText, silentLogger } from '@allocnet/cni';
import type { Attachment, CacheEntry, CniResult, NetworkConfig } from '@allocnet/cni';
import { isIptablesError } from '@allocnet/iptables-node';
import type { Family } from '@allocnet/iptables-node';
import { NO_ADDRESS, dnsOf, pickAddress, resultAddresses } from './address.js';
import { cniArgs } from './args.js';
import { ConfiguratorError, invalidField, isConfiguratorError, messageOf } from './errors.js';
import { networkFacts } from './facts.js';
import type { NetworkFacts } from './facts.js';
import { createGates } from './gates.js';
import { readReservation } from './ipam.js';
import { ensureHostState, sharedChains } from './host.js';
import type { AdminRule, SharedChain } from './host.js';
import { checkChainOf, checkFirewall, checkPortMappings, sameSpec } from './check.js';
import { batchedChainReader } from './chain-reader.js';
import {
  createCatalog,
  defaultNetworkConfig,
  defaultNetworkSettings,
  resolveNetwork,
} from './networks.js';
import type { CatalogSnapshot } from './networks.js';
import { portMappings } from './ports.js';
import { checkAllocId, decodeSpec } from './spec.js';
import {
  EMPTY_STATE,
  allocChains,
  applyPlan,
  describePlan,
  groupPlan,
  joinPlans,
  familyOf,
  firewallSpecs,
  linesAbout,
  linesNotAbout,
  planIsEmpty,
  planSweep,
  scanHost,
  sweep,
} from './sweep.js';
import type { Plan, Scan, SweepDeps } from './sweep.js';
import type {
  AllocAttachment,
  CniConfigurator,
  CniConfiguratorOptions,
  HostState,
  Leak,
  LeakReport,
  OperationOptions,
  PortMapping,
} from './types.js';

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

/**
 * Plugins whose marks on the node are all known (docs/cni.md, "What the plugins leave"): tagged
 * masquerade and DNAT chains, untagged firewall accept rules, host-local files; or nothing at all.
 */
const KNOWN_MARKS = new Set([
  'loopback',
  'bridge',
  'ptp',
  'firewall',
  'portmap',
  'tuning',
  'bandwidth',
]);

/** CNI error codes that say a CHECK could not run, rather than that it found the network broken. */
const CHECK_COULD_NOT_RUN = new Set([
  'spawn',
  'timeout',
  'aborted',
  'plugin-not-found',
  'invalid-config',
  'no-common-version',
  'incompatible-version',
  'check-not-supported',
  'cache',
  'not-added',
]);

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

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

function callOf(options: OperationOptions | undefined): { signal?: AbortSignal } {
  return options?.signal === undefined ? {} : { signal: options.signal };
}

/** The CNI attachment an allocation attachment stands for. */
function cniAttachment(a: AllocAttachment): Attachment {
  return {
    containerId: a.allocId,
    netns: a.netns,
    ifName: a.ifName,
    args: a.args,
    capabilityArgs: a.portMappings.length > 0 ? { portMappings: a.portMappings } : {},
  };
}

/**
 * Creates the configurator: reads the conf dir (and starts watching it), checks the default
 * network's options. Nothing touches iptables or plugins until an operation runs.
 *
 * Concurrency: operations on different allocations run in parallel. The only waits are the
 * first-setup gates (see gates.ts): while the bridge, or a family's firewall or portmap chains,
 * have never been set up by this process, setups that need them run one at a time. Callers (the
 * runner) never run two operations on one allocation at once.
 */
export async function createCniConfigurator(
  options: CniConfiguratorOptions,
): Promise<CniConfigurator> {
  const { runtime, iptables } = options;
  const logger = options.logger ?? silentLogger;
  const settings = defaultNetworkSettings(options.defaultNetwork);
  const ifName = options.ifName ?? 'eth0';
  const region = options.region ?? 'global';
  const ignoreHostIps = options.ignoreHostIps ?? false;
  const attemptsMax = options.retry?.attempts ?? 3;
  const delayMs = options.retry?.delayMs ?? 1000;
  const jitterMs = options.retry?.jitterMs ?? 1000;
  if (!Number.isInteger(attemptsMax) || attemptsMax < 1)
    throw invalidField(
      'retry.attempts',
      `should be a whole number of at least 1, got ${attemptsMax}`,
    );
  const random = options.random ?? Math.random;
  const sleep = options.sleep ?? defaultSleep;
  const catalog = await createCatalog({
    defaultNetwork: defaultNetworkConfig(settings),
    confDir: options.confDir,
    watch: options.watchConfDir ?? true,
    logger,
  });
  const gates = createGates();
  const deps: SweepDeps = { iptables, cache: runtime.cache, logger };
  // Shared chains and admin rules this process has made sure of, by `family:table:chain`.
  const prepared = new Set<string>();
  const factsCache = new Map<string, NetworkFacts>();
  const snapshots = new Map<string, NetworkConfig>();

  function factsOf(network: NetworkConfig): NetworkFacts {
    let facts = factsCache.get(network.bytes);
    if (facts === undefined) {
      facts = networkFacts(network);
      factsCache.set(network.bytes, facts);
    }
    return facts;
  }

  // CHECKs read iptables through one batched reader: a restore's concurrent CHECKs share reads.
  const readChain = batchedChainReader(iptables);

  /** The network an attachment was set up with, parsed once per distinct config. */
  function snapshotNetwork(a: AllocAttachment): NetworkConfig {
    let network = snapshots.get(a.network.config);
    if (network === undefined) {
      network = parseNetworkConfigText(
        a.network.config,
        `the network snapshot of ${JSON.stringify(a.allocId)}`,
      );
      if (snapshots.size > 64) snapshots.clear();
      snapshots.set(a.network.config, network);
    }
    return network;
  }

  /** The chain CHECK runs for a network, and the plugins checked here; once per config. */
  const checkChains = new Map<string, ReturnType<typeof checkChainOf>>();
  function checkChainFor(network: NetworkConfig) {
    let found = checkChains.get(network.bytes);
    if (found === undefined) {
      found = checkChainOf(network);
      if (checkChains.size > 64) checkChains.clear();
      checkChains.set(network.bytes, found);
    }
    return found;
  }

  function adminRules(): AdminRule[] {
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

  /** Shared chains (and, for the default network, the admin rules) this process has not made sure of. */
  async function prepareHost(
    facts: NetworkFacts,
    isDefault: boolean,
    call: { signal?: AbortSignal },
  ) {
    const chainKey = (c: SharedChain) => `${c.family}:${c.table}:${c.chain}`;
    const ruleKey = (r: AdminRule) => `${r.family}:rule:${r.chain}:${r.bridge}:${r.subnet}`;
    const chains = sharedChains(facts).filter((c) => !prepared.has(chainKey(c)));
    const rules = isDefault ? adminRules().filter((r) => !prepared.has(ruleKey(r))) : [];
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

  function managedFacts(
    snapshot: CatalogSnapshot,
    extra: readonly NetworkConfig[] = [],
  ): NetworkFacts[] {
    const all = new Map<string, NetworkFacts>();
    for (const n of [snapshot.defaultNetwork, ...snapshot.named.values(), ...extra])
      if (!all.has(n.name)) all.set(n.name, factsOf(n));
    return [...all.values()];
  }

  function failure(
    error: unknown,
    context: { allocId: string; network: string; attempts: number },
  ): ConfiguratorError {
    if (isConfiguratorError(error)) return error;
    const where = `setting up ${JSON.stringify(context.allocId)} in network ${JSON.stringify(context.network)}`;
    const aborted =
      (isCniError(error) && error.code === 'aborted') ||
      (isIptablesError(error) && error.code === 'aborted') ||
      (error instanceof Error && error.name === 'AbortError');
    const unavailable =
      (isCniError(error) && (error.code === 'plugin-not-found' || error.code === 'spawn')) ||
      (isIptablesError(error) && error.code === 'spawn');
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

  /** ADD with Nomad's retry: `attemptsMax` tries, a DEL and 1 s + 0–999 ms between them. */
  async function addWithRetry(
    network: NetworkConfig,
    attachment: Attachment,
    call: { signal?: AbortSignal },
  ): Promise<{ result: CniResult; attempts: number }> {
    let attempts = 0;
    let first: unknown;
    try {
      const added = await pRetry(
        async () => {
          attempts++;
          try {
            return await runtime.add(network, attachment, call);
          } catch (error) {
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

  /** After a failed setup: whatever the attempts left tagged with the allocation goes. */
  async function sweepAfterFailure(
    allocId: string,
    network: NetworkConfig,
    addresses: readonly string[],
  ) {
    try {
      const facts = factsOf(network);
      const removed = await sweep(
        deps,
        { fullIpam: [facts], withCache: true },
        () => ({ allocIds: new Set([allocId]), networks: [network.name], addresses }),
        {},
      );
      if (!planStateIsEmpty(removed))
        logger.warn('failed setup left state behind; removed it', { allocId, ...counts(removed) });
    } catch (error) {
      logger.warn('sweep after a failed setup failed', { allocId, error: messageOf(error) });
    }
  }

  /** What the CNI runtime cached for an allocation: results and ADD markers, in any network. */
  async function cachedAttachments(allocId: string): Promise<CacheEntry[]> {
    const snapshot = await catalog.current();
    const names = managedFacts(snapshot).map((f) => f.name);
    const results = await Promise.all(
      names.map(async (name) => {
        try {
          return await runtime.cache.readResult(name, allocId, ifName);
        } catch (error) {
          // An entry that cannot be read cannot drive a DEL; the audit removes the file.
          logger.warn('CNI cache entry cannot be read', {
            allocId,
            network: name,
            error: messageOf(error),
          });
          return undefined;
        }
      }),
    );
    const pending = (await runtime.pendingAdds()).filter(
      (e) => e.containerId === allocId && !results.some((r) => r?.networkName === e.networkName),
    );
    return [...results.filter((r): r is CacheEntry => r !== undefined), ...pending];
  }

  /**
   * After a DEL that succeeded, with every address known and only plugins whose marks are known
   * (docs/cni.md): whether anything of the allocation is left, asked with a few cheap questions
   * instead of reading all of iptables. A jump tagged with the allocation cannot outlive the
   * chain it jumps to (iptables refuses to delete a referenced chain), so the existence of
   * `CNI-<h>` and `CNI-DN-<h>` answers for every tagged rule; the firewall's untagged rules are
   * asked for by address; the reservations by file. On a node with 1,000 allocations that is
   * about 17 ms where iptables-save takes 138 ms (measured). True means "look properly".
   */
  async function mayHaveLeft(
    attachment: AllocAttachment,
    call: { signal?: AbortSignal },
  ): Promise<boolean> {
    const network = snapshotNetwork(attachment);
    if (!network.plugins.every((p) => KNOWN_MARKS.has(p.type))) return true;
    const facts = factsOf(network);
    const chains = allocChains(network.name, attachment.allocId);
    const checks: Promise<boolean>[] = [];
    const families = new Set(
      attachment.addresses.map(familyOf).filter((f): f is Family => f !== undefined),
    );
    for (const family of families) {
      const ipt = iptables[family];
      checks.push(
        ipt.chainExists('nat', chains.masq, call),
        ipt.chainExists('nat', chains.dnat, call),
      );
      if (facts.firewallAdminChain !== undefined) {
        // One read of CNI-FORWARD, shared by concurrent teardowns, begun after this DEL ended.
        const specs = attachment.addresses
          .filter((a) => familyOf(a) === family)
          .flatMap((address) => firewallSpecs(address, family));
        checks.push(
          readChain(family, 'filter', 'CNI-FORWARD', call).then((rules) =>
            specs.some((spec) => (rules ?? []).some((r) => sameSpec(r.spec, spec))),
          ),
        );
      }
    }
    if (facts.ipamDir !== undefined) {
      const dir = facts.ipamDir;
      for (const address of attachment.addresses)
        checks.push(
          readReservation(network.name, dir, address).then(
            (r) => r?.allocId === attachment.allocId,
          ),
        );
    }
    return (await Promise.all(checks)).some((found) => found);
  }

  async function teardownSweep(
    allocId: string,
    attachment: AllocAttachment | undefined,
    delFailed: boolean,
    call: { signal?: AbortSignal },
  ): Promise<HostState> {
    const snapshot = await catalog.current();
    const own = attachment === undefined ? undefined : snapshotNetwork(attachment);
    const managed = managedFacts(snapshot, own === undefined ? [] : [own]);
    const ownFacts = own === undefined ? undefined : factsOf(own);
    const fast = ownFacts !== undefined && !delFailed;
    if (fast && attachment !== undefined && !(await mayHaveLeft(attachment, call)))
      return EMPTY_STATE;
    return sweep(
      deps,
      {
        // A DEL that succeeded released the reservation and the cache entry; only the
        // allocation's own addresses need a look. Otherwise read everything.
        fullIpam: fast ? [] : ownFacts !== undefined ? [ownFacts] : managed,
        addressesIn: fast
          ? (attachment?.addresses ?? []).map((address) => ({ facts: ownFacts, address }))
          : [],
        withCache: !fast,
        // With every address known, only lines about this allocation need parsing: on a node
        // with 1,000 allocations that is a few lines of 13,000.
        ...(fast
          ? {
              lines: linesAbout(
                allocId,
                managed.map((f) => f.name),
                attachment?.addresses ?? [],
              ),
            }
          : {}),
        ...call,
      },
      () => ({
        allocIds: new Set([allocId]),
        networks: managed.map((f) => f.name),
        addresses: attachment?.addresses ?? [],
      }),
      call,
    );
  }

  async function fullScan(
    snapshot: CatalogSnapshot,
    call: { signal?: AbortSignal },
    known?: ReadonlySet<string>,
  ) {
    const managed = managedFacts(snapshot);
    const scan = await scanHost(deps, {
      fullIpam: managed,
      withCache: true,
      // What belongs to live allocations is not parsed: a reconcile of a node with 1,000 of them
      // would otherwise build 13,000 rule objects to find none of them leaked.
      ...(known === undefined
        ? {}
        : {
            lines: linesNotAbout(
              known,
              managed.map((f) => f.name),
            ),
          }),
      ...call,
    });
    // Networks the CNI cache names that are no longer configured are still ours to clean.
    const names = new Set([...managed.map((f) => f.name), ...scan.cache.map((c) => c.network)]);
    return { scan, managed, names };
  }

  function leakedIds(
    scan: Scan,
    names: ReadonlySet<string>,
    known: ReadonlySet<string>,
  ): Set<string> {
    const ids = new Set<string>();
    const consider = (id: string, network: string) => {
      if (!known.has(id) && names.has(network) && id !== '') ids.add(id);
    };
    for (const tables of scan.tables.values())
      for (const table of tables)
        for (const rule of table.rules) {
          const match =
            rule.comment === undefined
              ? null
              : /^(?:dnat )?name: "([^"]*)" id: "([^"]*)"$/.exec(rule.comment);
          if (match !== null) consider(match[2] ?? '', match[1] ?? '');
        }
    for (const r of scan.reservations) consider(r.allocId, r.network);
    for (const c of scan.cache) consider(c.allocId, c.network);
    return ids;
  }

  function leakOf(allocId: string, part: Plan | undefined): Leak {
    const plan = part ?? { rules: [], chains: [], reservations: [], cache: [] };
    const networks = new Set<string>();
    for (const r of plan.rules) {
      const m = r.rule.comment === undefined ? null : /name: "([^"]*)"/.exec(r.rule.comment);
      if (m?.[1] !== undefined) networks.add(m[1]);
    }
    for (const r of plan.reservations) networks.add(r.network);
    for (const c of plan.cache) networks.add(c.network);
    return { allocId, networks: [...networks].sort(), state: describePlan(plan) };
  }

  /** Everything tagged with an id outside `known`, planned for removal and split by owner. */
  async function planLeaks(known: ReadonlySet<string>, call: { signal?: AbortSignal }) {
    const snapshot = await catalog.current();
    const { scan, managed, names } = await fullScan(snapshot, call, known);
    const ids = leakedIds(scan, names, known);
    const plan = planSweep(scan, {
      allocIds: ids,
      networks: [...names],
      addresses: [],
      orphansOf: managed,
      known,
    });
    return { ids: [...ids].sort(), groups: groupPlan(plan) };
  }

  return {
    catalog: () => catalog.view(),

    async reload() {
      await catalog.reload();
      return catalog.view();
    },

    async setup(specInput, netnsInput, opts) {
      const spec = decodeSpec(specInput);
      const netns = checkNetnsPath(netnsInput);
      const call = callOf(opts);
      const snapshot = await catalog.current();
      const network = resolveNetwork(snapshot, spec.network);
      const facts = factsOf(network);
      const mappings: PortMapping[] = portMappings(spec, ignoreHostIps);
      const args = cniArgs(spec, region);
      const attachment: Attachment = {
        containerId: spec.allocId,
        netns,
        ifName,
        args,
        capabilityArgs: mappings.length > 0 ? { portMappings: mappings } : {},
      };
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
        if (failed.code !== 'invalid-argument') await sweepAfterFailure(spec.allocId, network, []);
        throw failed;
      }
      const addresses = resultAddresses(added.result);
      const record: AllocAttachment = {
        allocId: spec.allocId,
        network: { name: network.name, config: network.bytes },
        netns,
        ifName,
        args,
        portMappings: mappings,
        addresses,
      };
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
        await sweepAfterFailure(spec.allocId, network, addresses);
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

    async check(attachment, opts) {
      const call = callOf(opts);
      checkAllocId(attachment.allocId, 'attachment.allocId');
      const network = snapshotNetwork(attachment);
      // portmap 1.1.1's CHECK is broken (it checks IPv6 DNAT for IPv4-only containers and the
      // IPv4 rules in ip6tables: containernetworking/plugins#819), and the firewall's asks
      // iptables six times per allocation, each call reading the whole ruleset (30 ms each with
      // 1,000 allocations): CHECK runs the chain without them, and their rules are checked here
      // against one batched read of iptables (see checkPortMappings, checkFirewall).
      const { chain, checkedHere } = checkChainFor(network);
      let ran: boolean;
      try {
        ({ ran } = await runtime.check(chain, cniAttachment(attachment), call));
      } catch (error) {
        // A plugin that did not start, timed out, or cannot run this config did not find the
        // network broken: that is `unavailable` (or `aborted`), not `check-failed`.
        const couldNotRun =
          !isCniError(error) ||
          CHECK_COULD_NOT_RUN.has(error.code) ||
          call.signal?.aborted === true;
        const aborted =
          call.signal?.aborted === true || (isCniError(error) && error.code === 'aborted');
        throw new ConfiguratorError(
          `CHECK of ${JSON.stringify(attachment.allocId)} in network ${JSON.stringify(network.name)} ${couldNotRun ? 'could not run' : 'failed'}: ${messageOf(error)}`,
          {
            code: aborted ? 'aborted' : couldNotRun ? 'unavailable' : 'check-failed',
            allocId: attachment.allocId,
            network: network.name,
            cause: error,
          },
        );
      }
      if (ran && checkedHere.length > 0) {
        let problem: string | undefined;
        try {
          const found = await Promise.all(
            checkedHere.map((c) =>
              c.type === 'portmap'
                ? checkPortMappings(attachment, readChain, call)
                : checkFirewall(attachment, c.adminChain, readChain, call),
            ),
          );
          problem = found.find((p) => p !== undefined);
        } catch (error) {
          const aborted = call.signal?.aborted === true;
          throw new ConfiguratorError(
            `CHECK of ${JSON.stringify(attachment.allocId)} in network ${JSON.stringify(network.name)} could not run: reading iptables: ${messageOf(error)}`,
            {
              code: aborted ? 'aborted' : 'unavailable',
              allocId: attachment.allocId,
              network: network.name,
              cause: error,
            },
          );
        }
        if (problem !== undefined)
          throw new ConfiguratorError(
            `CHECK of ${JSON.stringify(attachment.allocId)} in network ${JSON.stringify(network.name)} failed: ${problem}`,
            { code: 'check-failed', allocId: attachment.allocId, network: network.name },
          );
      }
      return { ran };
    },

    async teardown(allocIdInput, attachment, opts) {
      const allocId = checkAllocId(allocIdInput);
      const call = callOf(opts);
      let delError: string | undefined;
      let delRan = attachment !== undefined;
      if (attachment === undefined) {
        // No attachment (a crash between ADD and the record, or an unknown allocation): DEL
        // from what the CNI runtime cached for it, if anything, so the container side goes too.
        const cached = await cachedAttachments(allocId);
        for (const entry of cached) {
          delRan = true;
          try {
            await runtime.undoPendingAdd(entry, call);
          } catch (error) {
            delError ??= messageOf(error);
            logger.warn('DEL from the CNI cache failed; the audit removes what it left', {
              allocId,
              network: entry.networkName,
              error: messageOf(error),
            });
          }
        }
      } else {
        if (attachment.allocId !== allocId)
          throw invalidField(
            'attachment.allocId',
            `is ${JSON.stringify(attachment.allocId)}, not ${JSON.stringify(allocId)}`,
          );
        try {
          await runtime.del(snapshotNetwork(attachment), cniAttachment(attachment), call);
        } catch (error) {
          delError = messageOf(error);
          logger.warn('DEL failed; the audit removes what it left', { allocId, error: delError });
        }
      }
      let removed: HostState;
      try {
        removed = await teardownSweep(allocId, attachment, delError !== undefined, call);
      } catch (error) {
        throw new ConfiguratorError(
          `tearing down ${JSON.stringify(allocId)}: state tagged with it could not be removed: ${messageOf(error)}`,
          { code: 'teardown-failed', allocId, cause: error },
        );
      }
      if (!planStateIsEmpty(removed))
        logger.warn('teardown audit removed state the DEL left', {
          allocId,
          delError,
          ...counts(removed),
        });
      return { allocId, delRan, delError, removed };
    },

    async forceCleanup(allocIdInput, opts) {
      const allocId = checkAllocId(allocIdInput);
      const network = opts?.network === undefined || opts.network === '' ? undefined : opts.network;
      const call = callOf(opts);
      const snapshot = await catalog.current();
      const managed = managedFacts(snapshot);
      const dryRun = opts?.dryRun ?? false;
      try {
        const removed = await sweep(
          deps,
          {
            fullIpam: network === undefined ? managed : managed.filter((f) => f.name === network),
            withCache: true,
            ...call,
          },
          () => ({
            allocIds: new Set([allocId]),
            ...(network === undefined ? {} : { network }),
            networks: managed.map((f) => f.name),
            addresses: [],
          }),
          { ...call, dryRun },
        );
        return { allocId, dryRun, removed };
      } catch (error) {
        throw new ConfiguratorError(`cleaning up ${JSON.stringify(allocId)}: ${messageOf(error)}`, {
          code: 'cleanup-failed',
          allocId,
          cause: error,
        });
      }
    },

    async findLeaks(known, opts): Promise<LeakReport> {
      const { ids, groups } = await planLeaks(new Set(known), callOf(opts));
      const orphans = groups.get(undefined);
      return {
        leaks: ids.map((id) => leakOf(id, groups.get(id))),
        orphans: orphans === undefined ? EMPTY_STATE : describePlan(orphans),
      };
    },

    async reapLeaks(knownIds, opts) {
      const call = callOf(opts);
      const batchSize = opts?.batchSize ?? 500;
      if (!Number.isInteger(batchSize) || batchSize < 1)
        throw invalidField('batchSize', `should be a whole number of at least 1, got ${batchSize}`);
      const known = new Set(knownIds);
      const found = await planLeaks(known, call);
      const ids = found.ids;
      let groups = found.groups;
      const total = ids.length;
      const reaped: Leak[] = [];
      const failed: { allocId: string; error: string }[] = [];
      let orphans: HostState = EMPTY_STATE;
      // Allocations in batches, then the orphans (owner undefined) on their own.
      const batches: (string | undefined)[][] = [];
      for (let i = 0; i < ids.length; i += batchSize) batches.push(ids.slice(i, i + batchSize));
      batches.push([undefined]);
      let done = 0;
      for (const batch of batches) {
        let parts = batch.map((owner) => groups.get(owner));
        let error: unknown;
        for (let attempt = 1; ; attempt++) {
          const plan = joinPlans(parts.filter((p): p is Plan => p !== undefined));
          if (planIsEmpty(plan)) break;
          const { failed: families } = await applyPlan(deps, plan, call);
          if (families.size === 0) break;
          error = [...families.values()][0];
          if (attempt >= 3) break;
          // iptables changed since the scan (another allocation's plugin was at work): look
          // again, for what is left of this batch.
          ({ groups } = await planLeaks(known, call));
          parts = batch.map((owner) => groups.get(owner));
          error = undefined;
        }
        for (const [i, owner] of batch.entries()) {
          if (owner === undefined) {
            const part = parts[i];
            if (error === undefined && part !== undefined) orphans = describePlan(part);
            continue;
          }
          if (error === undefined) reaped.push(leakOf(owner, parts[i]));
          else failed.push({ allocId: owner, error: messageOf(error) });
        }
        const counted = batch.filter((id) => id !== undefined);
        if (counted.length > 0) {
          done += counted.length;
          opts?.onProgress?.({ done, total, allocId: counted.at(-1) });
        }
      }
      return { reaped, orphans, failed };
    },

    async ensureHostPrerequisites(opts) {
      const call = callOf(opts);
      const rules = adminRules();
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

    close() {
      catalog.close();
      return Promise.resolve();
    },
  };
}

function planStateIsEmpty(state: HostState): boolean {
  return (
    state.rules.length === 0 &&
    state.chains.length === 0 &&
    state.reservations.length === 0 &&
    state.cacheFiles.length === 0
  );
}

function counts(state: HostState) {
  return {
    rules: state.rules.length,
    chains: state.chains.length,
    reservations: state.reservations.length,
    cacheFiles: state.cacheFiles.length,
  };
}
