// tools/soak, the built CLI, bounded: churn through a real agent in its own node namespace, the
// leak check and the summary; and a Ctrl-C halfway, after which nothing it made is left. Needs
// root; never touches the root namespace (the soak makes and removes its own namespaces, under
// the run's ALLOCNET_TESTNS_PREFIX, which it inherits).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { requireNetworkTestHost } from '@allocnet/testns';
import { REPO } from './fixtures/agent-host.js';

/** The soak's entry, built (`pnpm --filter @allocnet/soak build`; tools/setup.sh does). */
const SOAK_MAIN = resolve(REPO, 'tools', 'soak', 'dist', 'main.js');

/** The first line of the soak's log: where its node, namespaces and files are. */
const READY =
  /^soak: agent pid \d+ ready in node namespace (\S+) \(allocation namespaces (\S+)\*, files in (\S+)\), RSS [\d.]+ MiB$/m;

interface Soak {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves once the soak's stderr matches `pattern` (rejects if it exits first). */
  waitFor(pattern: RegExp): Promise<RegExpExecArray>;
  readonly exited: Promise<number | null>;
}

const running: ChildProcess[] = [];

function startSoak(args: readonly string[]): Soak {
  const child = spawn(process.execPath, [SOAK_MAIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.push(child);
  let out = '';
  let err = '';
  const waiters: (() => void)[] = [];
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
    for (const w of [...waiters]) w();
  });
  const exited = new Promise<number | null>((done) => child.once('close', done));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor: (pattern) =>
      new Promise((found, fail) => {
        const look = () => {
          const m = pattern.exec(err);
          if (m === null) return;
          waiters.splice(waiters.indexOf(look), 1);
          found(m);
        };
        waiters.push(look);
        look();
        void exited.then((code) => {
          fail(new Error(`the soak exited (${code ?? '?'}) before ${String(pattern)}:\n${err}`));
        });
      }),
  };
}

async function namespacesStartingWith(prefix: string): Promise<string[]> {
  return (await readdir('/run/netns')).filter((n) => n.startsWith(prefix));
}

/**
 * What the soak said it made, checked gone. A namespace left is reported with the soak's whole
 * stderr (its cleanup logs what it could not remove, and when the agent had to be killed).
 */
async function expectAllRemoved(ready: RegExpExecArray, soak: Soak): Promise<void> {
  const [, node = '', netnsPrefix = '', dir = ''] = ready;
  const left = [
    ...(await namespacesStartingWith(node)),
    ...(await namespacesStartingWith(netnsPrefix)),
  ];
  expect({ left, stderr: left.length === 0 ? '' : soak.stderr() }).toEqual({
    left: [],
    stderr: '',
  });
  expect(existsSync(dir)).toBe(false);
}

beforeAll(async () => {
  await requireNetworkTestHost(['ip', 'iptables-save', 'ip6tables-save', 'nsenter']);
});

afterEach(async () => {
  // A soak a failed test left running: SIGINT is its Ctrl-C, after which it cleans up.
  for (const child of running.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const closed = new Promise((r) => child.once('close', r));
    child.kill('SIGINT');
    await closed;
  }
});

it('churns 64 cycles 8 wide with no failure and a clean node, and removes what it made', async () => {
  const soak = startSoak(['--count', '64', '--width', '8', '--warmup', '64', '--json']);
  const ready = await soak.waitFor(READY);
  expect(await soak.exited).toBe(0);
  const summary = JSON.parse(soak.stdout()) as Record<string, unknown>;
  expect(summary).toMatchObject({
    ok: true,
    count: 64,
    width: 8,
    warmup: 64,
    cycles: 64,
    failures: 0,
    failureMessages: [],
    leaks: [],
    problems: [],
    // The warm-up was the whole run: a short run's RSS still grows, so it is not judged.
    rssGrowthPercent: null,
    rssLimitPercent: 10,
  });
  const setup = summary.setupMs as { p50: number; p99: number };
  expect(setup.p50).toBeGreaterThan(0);
  expect(setup.p99).toBeGreaterThanOrEqual(setup.p50);
  expect(soak.stderr()).toContain('soak: 64/64 cycles, 0 failed, ');
  expect(soak.stderr()).toContain('soak: leak check\n');
  await expectAllRemoved(ready, soak);
});

it('on Ctrl-C stops the churn, removes the agent, its namespaces and files, and exits 130', async () => {
  const soak = startSoak(['--count', '100000', '--width', '4', '--progress-every', '4']);
  const ready = await soak.waitFor(READY);
  await soak.waitFor(/^soak: 4\/100000 cycles, /m);
  soak.child.kill('SIGINT');
  expect(await soak.exited).toBe(130);
  expect(soak.stderr()).toContain('soak: interrupted; stopping the churn and cleaning up\n');
  expect(soak.stderr()).toMatch(
    /\nsoak FAILED: soak interrupted \(SIGINT or SIGTERM\); the node and the agent were removed\n$/,
  );
  expect(soak.stdout()).toBe('');
  await expectAllRemoved(ready, soak);
});

it('refuses a bad flag with exit status 2, naming it, before making anything', async () => {
  const soak = startSoak(['--width', '0']);
  expect(await soak.exited).toBe(2);
  expect(soak.stderr()).toMatch(/^--width "0" is not a whole number from 1 to 1000\n\nUsage: /);
});
