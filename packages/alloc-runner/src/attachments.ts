// An allocation's several networks, as its operations go through them: the plan of a setup (one
// entry per attachment, the primary first), its admission (every attachment's spec checked and
// every host port claimed before any intent is recorded), the teardown of one secondary
// (`TeardownOptions.only`, so that it never touches the primary's state), the undo of them all in
// reverse order, and the CHECK of each. lifecycle.ts, teardown.ts, restore.ts and attach.ts call
// these; like them, everything here runs in the allocation's turn of the queue.
import type { FieldPath } from '@allocnet/base';
import { portMappingsOverlap } from '@allocnet/cni-configurator';
import type {
  AllocAttachment,
  AllocNetworkSpec,
  CheckBatch,
  PortMapping,
  RequestedPortMapping,
  TeardownReport,
} from '@allocnet/cni-configurator';
import { fieldOf, networkKey } from './attachment-spec.js';
import { callOf } from './context.js';
import type { RunnerContext } from './context.js';
import { RunnerError, abortCode, invalidInput, messageOf } from './errors.js';
import type { AllocRecord, ExtraAttachment } from './record.js';
import { configuratorSpecsOf } from './spec.js';
import type { RunnerSpec } from './spec.js';

/** One attachment a setup makes: its configurator spec, and what it re-claims (a recreate). */
export interface AttachmentPlan {
  readonly spec: AllocNetworkSpec;
  /** Whether `attach` added it to the running allocation (kept through a recreate). */
  readonly attached: boolean;
  /** Exactly these addresses (restore's recreate: its recorded ones). */
  readonly reclaim?: readonly string[];
}

/** The plan of a new setup of `spec`: every attachment it names, in order. */
export function plansOf(spec: RunnerSpec): AttachmentPlan[] {
  return configuratorSpecsOf(spec).map((s) => ({ spec: s, attached: false }));
}

/** The addresses an attachment re-claims: every recorded one, v4 and v6 (none: any address). */
function reclaimOfAttachment(
  attachment: AllocAttachment | undefined,
): readonly string[] | undefined {
  const addresses = attachment?.addresses ?? [];
  return addresses.length === 0 ? undefined : addresses;
}

const withReclaim = (plan: AttachmentPlan, reclaim: readonly string[] | undefined) =>
  reclaim === undefined ? plan : { ...plan, reclaim };

/**
 * The plan of setting a recorded allocation up again: the primary as its spec says, then its
 * secondaries as the record has them (those `attach` added included, those detached left out);
 * with `reclaim`, each on its recorded addresses.
 */
export function plansOfRecord(rec: AllocRecord, reclaim: boolean): AttachmentPlan[] {
  const [primary] = plansOf(rec.spec);
  const first = primary as AttachmentPlan;
  return [
    reclaim ? withReclaim(first, reclaimOfAttachment(rec.attachment)) : first,
    ...(rec.extra ?? []).map((e) => {
      const plan = { spec: e.spec, attached: e.attached };
      return reclaim ? withReclaim(plan, reclaimOfAttachment(e.attachment)) : plan;
    }),
  ];
}

/** The embedded default network's name, as the configurator's catalog says now. */
function defaultNetwork(ctx: RunnerContext): string {
  return ctx.networking.catalog().networks.find((n) => n.source === 'default')?.name ?? '';
}

/** The network a spec names, by its name (the default network's for none). */
export function networkOf(ctx: RunnerContext, spec: AllocNetworkSpec): string {
  return networkKey(spec.network) === '' ? defaultNetwork(ctx) : (spec.network as string);
}

/** `attachment 1 (net1, network "storage")`: how messages name attachment `k`. */
export function describeAttachment(ctx: RunnerContext, k: number, spec: AllocNetworkSpec): string {
  return attachmentName(k, spec.ifName ?? 'eth0', networkOf(ctx, spec));
}

/** `attachment 1 (net1, network "storage")`, from its parts. */
export function attachmentName(k: number, ifName: string, network: string): string {
  return `attachment ${k} (${ifName}, network ${JSON.stringify(network)})`;
}

/** The host ports an attachment the allocation has maps, and how messages name it. */
export interface MappedPorts {
  readonly which: string;
  readonly ports: readonly PortMapping[];
}

/**
 * Where field `path` of plan `k` is in what the caller gave: under `root` for an attach's; under
 * `spec` for an attachment the spec names, found by its interface (a detach of one the spec
 * named leaves the record's attachments fewer than the spec's); under `spec.extra[k]` for one an
 * attach added, which a recreate sets up again.
 */
export function fieldOfPlan(
  spec: RunnerSpec,
  plan: AttachmentPlan,
  k: number,
  path: FieldPath,
  root?: FieldPath,
): FieldPath {
  if (root !== undefined) return [...root, ...path];
  if (k === 0) return fieldOf(spec, 0, path);
  const named = plan.attached
    ? -1
    : configuratorSpecsOf(spec).findIndex((s) => s.ifName === plan.spec.ifName);
  return named > 0 ? fieldOf(spec, named, path) : ['spec', 'extra', k, ...path];
}

/**
 * The admission of attachments: each spec checked against the catalog (`checkSpec`), no host port
 * that an attachment the allocation has maps (`mapped`: an attach's), no network twice (the
 * default network named or not), and the host ports of them all, claimed in one
 * synchronous step (port-claims.ts) before any intent record. `first` is the index of `plans[0]`
 * among the allocation's attachments (an attach: their count); `taken`, the networks the
 * allocation has (by name, to their index); `root`, where the plans' fields are for an attach.
 * What the configurator refuses is thrown as `fail` makes it, given where its fields are.
 */
export function admit(
  ctx: RunnerContext,
  spec: RunnerSpec,
  plans: readonly AttachmentPlan[],
  options: {
    readonly first: number;
    readonly fail: (error: unknown, at: (path: FieldPath) => FieldPath) => RunnerError;
    readonly root?: FieldPath;
    readonly taken?: ReadonlyMap<string, number>;
    /** The host ports of the attachments the allocation has (an attach's). */
    readonly mapped?: readonly MappedPorts[];
  },
): void {
  const networks = new Map(options.taken);
  const wanted: RequestedPortMapping[] = [];
  const what = options.root === undefined ? 'invalid allocation spec' : 'invalid attachment';
  for (const [i, plan] of plans.entries()) {
    const k = options.first + i;
    const at = (path: FieldPath) => fieldOfPlan(spec, plan, k, path, options.root);
    let mappings: readonly RequestedPortMapping[];
    try {
      ctx.networking.checkSpec(plan.spec);
      mappings = ctx.networking.portMappingsOf(plan.spec);
    } catch (error) {
      throw options.fail(error, at);
    }
    for (const m of mappings) {
      // The claims never refuse the allocation its own port: a second attachment mapping it
      // would get a second DNAT behind the first, and its detach would free the claim of both.
      const other = options.mapped?.find((o) => o.ports.some((p) => portMappingsOverlap(p, m)));
      if (other !== undefined)
        throw invalidInput(
          what,
          at(m.field),
          [
            `maps host port ${m.hostPort}/${m.protocol}, as ${other.which} does (a host port goes to one attachment)`,
          ],
          { allocId: spec.allocId },
        );
      wanted.push({ ...m, field: at(m.field).slice(1) });
    }
    const network = networkOf(ctx, plan.spec);
    const other = networks.get(network);
    if (other !== undefined)
      throw invalidInput(
        what,
        at(['network']),
        [
          `is network ${JSON.stringify(network)}, as attachment ${other} is (every attachment is in a different network)`,
        ],
        { allocId: spec.allocId },
      );
    networks.set(network, k);
  }
  ctx.ports.claim(spec.allocId, wanted, options.root?.slice(0, 1) ?? ['spec']);
}

/** `only` for a secondary's teardown: its network and interface, as recorded. */
export function onlyOf(
  ctx: RunnerContext,
  entry: Pick<ExtraAttachment, 'spec' | 'attachment'>,
): { network: string; ifName: string } {
  return {
    network: entry.attachment?.network.name ?? networkOf(ctx, entry.spec),
    ifName: entry.attachment?.ifName ?? entry.spec.ifName ?? '',
  };
}

/** The teardown of one secondary: DEL with its attachment (or its sweep), scoped to it. */
export function tearDownSecondary(
  ctx: RunnerContext,
  allocId: string,
  entry: Pick<ExtraAttachment, 'spec' | 'attachment'>,
  options: { readonly signal?: AbortSignal; readonly keepHolds?: boolean } = {},
): Promise<TeardownReport> {
  return ctx.networking.teardown(allocId, entry.attachment, {
    ...options,
    only: onlyOf(ctx, entry),
  });
}

/**
 * Undoes the secondaries, last first, each scoped to itself; goes on past a failure and returns
 * the problems. Runs without the caller's signal: an aborted setup still cleans up.
 */
export async function undoSecondaries(
  ctx: RunnerContext,
  allocId: string,
  extras: readonly ExtraAttachment[],
  keepHolds = false,
): Promise<string[]> {
  const problems: string[] = [];
  for (const [i, entry] of [...extras.entries()].reverse()) {
    try {
      await tearDownSecondary(ctx, allocId, entry, keepHolds ? { keepHolds } : {});
    } catch (error) {
      problems.push(
        `the configurator's teardown of ${describeAttachment(ctx, i + 1, entry.spec)} failed: ${messageOf(error)}`,
      );
    }
  }
  return problems;
}

/** What `checkEach` found: every CHECK passed (`ran`: at least one ran), or the first failure. */
export type CheckOutcome =
  | { readonly ok: true; readonly ran: boolean }
  | { readonly ok: false; readonly error: unknown; readonly which: string | undefined };

/**
 * CHECK of every ready attachment of the record, the primary first, each with exactly what its
 * ADD used; stops at the first failure, naming the attachment when the allocation has several.
 */
export async function checkEach(
  ctx: RunnerContext,
  rec: AllocRecord,
  signal: AbortSignal | undefined,
  batch?: CheckBatch,
): Promise<CheckOutcome> {
  const extras = (rec.extra ?? []).filter((e) => e.phase === 'ready');
  const several = extras.length > 0;
  const entries: { attachment: AllocAttachment; which: () => string }[] = [
    {
      attachment: rec.attachment as AllocAttachment,
      which: () => describeAttachment(ctx, 0, configuratorSpecsOf(rec.spec)[0] as AllocNetworkSpec),
    },
    ...extras.map((e) => ({
      attachment: e.attachment as AllocAttachment,
      which: () => describeAttachment(ctx, (rec.extra ?? []).indexOf(e) + 1, e.spec),
    })),
  ];
  let ran = false;
  for (const entry of entries) {
    try {
      const options = batch === undefined ? callOf(signal) : { ...callOf(signal), batch };
      ran = (await ctx.networking.check(entry.attachment, options)).ran || ran;
    } catch (error) {
      return { ok: false, error, which: several ? entry.which() : undefined };
    }
  }
  return { ok: true, ran };
}

/** `<which>: <message>`, or the message alone. */
export function named(which: string | undefined, error: unknown): string {
  return which === undefined ? messageOf(error) : `${which}: ${messageOf(error)}`;
}

/** The runner's error for an attach or detach that failed (`code`) and was undone as it could. */
export function attachFailure(
  what: string,
  error: unknown,
  allocId: string,
  signal: AbortSignal | undefined,
  code: 'setup-failed' | 'teardown-failed',
  problems: readonly string[] = [],
): RunnerError {
  return new RunnerError(
    `${what} failed: ${messageOf(error)}${
      problems.length === 0 ? '' : `; undoing it also failed: ${problems.join('; ')}`
    }`,
    { code: abortCode(signal) ?? code, allocId, cause: error },
  );
}
