// SIGKILL at random moments during 100 concurrent operations, repeated (issue 16): each round
// sends 100 setups and teardowns at once to the real agent, kills it (and every process it
// started, as systemd kills a unit's control group) once a random number of them has answered
// plus a random delay, restarts it on the same data dir, and audits the node against what the
// agent says and what it answered before the kill:
// - nothing lost: a setup answered OK (and not torn down since) is ready, a teardown answered OK
//   is gone;
// - nothing half-applied: every record is ready or failed (restore settled the rest); a ready one
//   has its namespace and its address reservation and passes CHECK; a failed one has neither;
//   every namespace with the agent's prefix and every reservation belongs to a ready record;
//   ListLeaks finds nothing;
// - at the end, with everything torn down, the ruleset is back at its baseline.
// The moments come from a seeded generator: ALLOCNET_CHAOS_SEED picks another sequence,
// ALLOCNET_CHAOS_ROUNDS runs more rounds (the long mode; the README's test command runs 3).
// Needs root, iproute2, iptables and containernetworking-plugins; never touches the root
// namespace.
import * as grpc from '@grpc/grpc-js';
import { isServiceError, unary } from '@allocnet/proto';
import type { AllocNetworkServiceClient } from '@allocnet/proto';
import { seeded } from '@allocnet/testns';
import { useAgentHost } from './fixtures/agent-host.js';
import type { AgentHost, AgentProcess } from './fixtures/agent-host.js';
import { processTable } from './fixtures/proc.js';

const SEED = Number(process.env.ALLOCNET_CHAOS_SEED ?? '1601');
const ROUNDS = Number(process.env.ALLOCNET_CHAOS_ROUNDS ?? '3');
const OPS = 100;

let host: AgentHost;

useAgentHost((made) => {
  host = made;
});

/**
 * SIGKILL to the agent and every process under it, as systemd's stop of a crashed unit does:
 * the agent is stopped first so that it starts nothing new while its tree is read.
 */
async function killTree(agent: AgentProcess): Promise<void> {
  const root = agent.ready.pid;
  process.kill(root, 'SIGSTOP');
  const byParent = await processTable();
  const doomed = [root];
  for (let i = 0; i < doomed.length; i++)
    for (const [pid, ppid] of byParent) if (ppid === doomed[i]) doomed.push(pid);
  for (const pid of doomed) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (error) {
      // Gone already (a plugin that just exited).
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }
  await agent.exited;
}

/** 'ok', or '<STATUS>: <details>'. */
type Outcome = string;

async function outcomeOf(call: Promise<unknown>): Promise<Outcome> {
  try {
    await call;
    return 'ok';
  } catch (error) {
    if (isServiceError(error)) return `${grpc.status[error.code]}: ${error.details}`;
    throw error;
  }
}

function allocId(n: number): string {
  return `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;
}

/** The node against the agent's records; returns the ids that are ready. */
async function audit(
  client: AllocNetworkServiceClient,
  expectReady: ReadonlySet<string>,
  expectGone: ReadonlySet<string>,
  round: number,
): Promise<{ ready: Set<string>; failed: Set<string> }> {
  const where = `seed ${SEED}, round ${round}`;
  const { allocations } = await unary(client, 'ListAllocNetworks', {});
  const ready = new Set<string>();
  const failed = new Set<string>();
  for (const a of allocations) {
    if (a.phase === 'PHASE_READY') ready.add(a.allocId);
    else if (a.phase === 'PHASE_FAILED') failed.add(a.allocId);
    else throw new Error(`${where}: allocation ${a.allocId} is ${a.phase} after restore`);
  }
  for (const id of expectReady) {
    expect([where, id, ready.has(id)]).toEqual([where, id, true]);
  }
  for (const id of expectGone) {
    expect([where, id, ready.has(id) || failed.has(id)]).toEqual([where, id, false]);
  }
  const namespaces = new Set(await host.namespaces());
  const reservations = await host.reservations();
  const reservedBy = new Map(Object.entries(reservations).map(([ip, id]) => [id, ip]));
  for (const a of allocations) {
    const name = `${host.netnsPrefix}${a.allocId}`;
    if (a.phase === 'PHASE_READY') {
      expect([where, a.allocId, namespaces.has(name), reservedBy.get(a.allocId)]).toEqual([
        where,
        a.allocId,
        true,
        a.address,
      ]);
      const check = await unary(client, 'CheckAllocNetwork', { allocId: a.allocId });
      expect([where, a.allocId, check.healthy, check.problem]).toEqual([
        where,
        a.allocId,
        true,
        '',
      ]);
    } else {
      expect([where, a.allocId, namespaces.has(name), reservedBy.get(a.allocId)]).toEqual([
        where,
        a.allocId,
        false,
        undefined,
      ]);
    }
  }
  expect([
    where,
    [...namespaces].filter((n) => !ready.has(n.slice(host.netnsPrefix.length))),
  ]).toEqual([where, []]);
  expect([where, [...reservedBy.keys()].filter((id) => !ready.has(id))]).toEqual([where, []]);
  const leaks = await unary(host.operator(), 'ListLeaks', {});
  expect([where, leaks.leaks]).toEqual([where, []]);
  return { ready, failed };
}

it(
  `survives SIGKILL at random moments during ${OPS} concurrent operations, ${ROUNDS} rounds, with nothing lost or half-applied`,
  async () => {
    const random = seeded(SEED);
    let agent = await host.start();
    let client = host.alloc();
    // Baseline: the shared chains exist once one allocation with a port came and went.
    expect(
      await outcomeOf(
        unary(client, 'SetupAllocNetwork', {
          allocId: allocId(0xffff),
          namespace: 'default',
          jobId: 'chaos',
          groupName: 'g',
          ports: [{ label: 'p', value: 19999, to: 80 }],
        }),
      ),
    ).toBe('ok');
    expect(
      await outcomeOf(unary(client, 'TeardownAllocNetwork', { allocId: allocId(0xffff) })),
    ).toBe('ok');
    const baseline = await host.ruleset();

    let next = 1;
    let live = new Set<string>();
    const ports = new Map<string, number>();
    for (let round = 1; round <= ROUNDS; round++) {
      const ops: { kind: 'setup' | 'teardown'; id: string }[] = [];
      const pool = [...live];
      for (let i = 0; i < OPS; i++) {
        if (pool.length > 0 && (live.size + ops.length > 48 || random() < 0.4)) {
          const id = pool.splice(Math.floor(random() * pool.length), 1)[0] as string;
          ops.push({ kind: 'teardown', id });
        } else {
          const id = allocId(next++);
          ports.set(id, 20000 + (next % 20000));
          ops.push({ kind: 'setup', id });
        }
      }
      const answeredBeforeKill = Math.floor(random() * 70);
      const extraMs = Math.floor(random() * 300);
      const outcomes = new Map<string, Outcome>();
      let answered = 0;
      let killed = false;
      let reachedKill: () => void = () => undefined;
      const killPoint = new Promise<void>((resolve) => {
        reachedKill = resolve;
      });
      if (answeredBeforeKill === 0) reachedKill();
      const calls = ops.map(async ({ kind, id }) => {
        const call =
          kind === 'setup'
            ? unary(
                client,
                'SetupAllocNetwork',
                {
                  allocId: id,
                  namespace: 'default',
                  jobId: 'chaos',
                  groupName: 'g',
                  ports: [{ label: 'p', value: ports.get(id) ?? 0, to: 80 }],
                },
                { deadlineMs: 120_000 },
              )
            : unary(client, 'TeardownAllocNetwork', { allocId: id }, { deadlineMs: 120_000 });
        const result = await outcomeOf(call);
        // Only answers that came before the kill count as promises the agent made.
        if (!killed) outcomes.set(`${kind} ${id}`, result);
        if (++answered === answeredBeforeKill) reachedKill();
      });
      await Promise.race([killPoint, Promise.all(calls)]);
      await new Promise((resolve) => setTimeout(resolve, extraMs));
      killed = true;
      // The kill lands with operations in flight, not after the round.
      expect([`seed ${SEED}, round ${round}`, answered < OPS]).toEqual([
        `seed ${SEED}, round ${round}`,
        true,
      ]);
      await killTree(agent);
      await Promise.all(calls);
      client.close();

      agent = await host.start();
      client = host.alloc();

      const expectReady = new Set<string>();
      const expectGone = new Set<string>();
      for (const id of live) if (!ops.some((o) => o.id === id)) expectReady.add(id);
      for (const { kind, id } of ops) {
        const result = outcomes.get(`${kind} ${id}`);
        if (result === 'ok') (kind === 'setup' ? expectReady : expectGone).add(id);
        else if (result !== undefined) {
          // An answer before the kill that was not OK: only the refusals a busy node may give.
          expect([`seed ${SEED}, round ${round}`, kind, id, result]).toEqual([
            `seed ${SEED}, round ${round}`,
            kind,
            id,
            expect.stringMatching(/^(UNAVAILABLE|INTERNAL): /),
          ]);
        }
      }
      const { ready, failed } = await audit(client, expectReady, expectGone, round);
      // Failed records (setups the kill interrupted) are cleared the way a scheduler would.
      for (const id of failed) {
        expect(await outcomeOf(unary(client, 'TeardownAllocNetwork', { allocId: id }))).toBe('ok');
      }
      live = ready;
    }

    for (const id of live) {
      expect(await outcomeOf(unary(client, 'TeardownAllocNetwork', { allocId: id }))).toBe('ok');
    }
    expect(await unary(client, 'ListAllocNetworks', {})).toEqual({ allocations: [] });
    expect(await host.namespaces()).toEqual([]);
    expect(await host.reservations()).toEqual({});
    expect(await host.ruleset()).toBe(baseline);
    expect((await unary(host.operator(), 'ListLeaks', {})).leaks).toEqual([]);
    expect(await agent.stop()).toEqual({ code: 0, signal: null });
  },
  60_000 + ROUNDS * 60_000,
);
