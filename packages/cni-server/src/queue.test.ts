import { spawn } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from '@allocnet/cni/testing';
import type { CniHandler } from './handler.js';
import { repeatCniQueueReplay, replayCniQueue } from './queue.js';
import type { ReplayReport } from './queue.js';
import type { CniCall } from './request.js';
import { createRecordingLogger } from './testing/index.js';

let tmp: Awaited<ReturnType<typeof tempDir>>;
const handled: CniCall[] = [];
let failFor: Set<string>;
const outcomes: string[] = [];

const handler: CniHandler = {
  handle(call) {
    handled.push(call);
    return failFor.has(call.containerId)
      ? Promise.reject(new Error('the agent could not run the DEL'))
      : Promise.resolve({ status: 200, body: undefined });
  },
};

function queued(containerId: string, command = 'DEL') {
  return JSON.stringify({
    queuedAtUnixMs: 1,
    env: { CNI_COMMAND: command, CNI_CONTAINERID: containerId, CNI_NETNS: '', CNI_IFNAME: 'eth0' },
    config: { cniVersion: '1.0.0', name: 'allocnet', type: 'allocnet-cni' },
  });
}

const options = () => ({
  dir: tmp.path,
  handler,
  logger: createRecordingLogger(),
  onReplay: (o: string) => outcomes.push(o),
});

beforeEach(async () => {
  tmp = await tempDir('allocnet-cni-queue-');
  handled.length = 0;
  outcomes.length = 0;
  failFor = new Set();
});

afterEach(async () => {
  await tmp.remove();
});

describe('replayCniQueue', () => {
  it('runs every queued DEL; removes the done and the undecodable, keeps the failed', async () => {
    await writeFile(join(tmp.path, 'a.del'), queued('c1'));
    await writeFile(join(tmp.path, 'b.del'), queued('c2'));
    await writeFile(join(tmp.path, 'c.del'), 'not json');
    await writeFile(join(tmp.path, 'd.del'), queued('c3', 'ADD'));
    await writeFile(join(tmp.path, '.e.del.tmp123'), queued('c4'));
    failFor = new Set(['c2']);
    const report = await replayCniQueue(options());
    expect(report).toEqual({ replayed: 1, failed: 1, dropped: 2 });
    expect(handled.map((c) => c.containerId)).toEqual(['c1', 'c2']);
    expect((await readdir(tmp.path)).filter((n) => !n.startsWith('.'))).toEqual(['b.del']);
    expect(outcomes.sort()).toEqual(['dropped', 'dropped', 'failed', 'replayed']);

    failFor = new Set();
    expect(await replayCniQueue(options())).toEqual({ replayed: 1, failed: 0, dropped: 0 });
    expect((await readdir(tmp.path)).filter((n) => n.endsWith('.del'))).toEqual([]);
  });

  it('waits for a plugin that holds the shared lock while it writes', async () => {
    await writeFile(join(tmp.path, 'a.del'), queued('c1'));
    await writeFile(join(tmp.path, '.lock'), '');
    // What allocnet-cni does while it writes a queue file: flock(LOCK_SH) on .lock; it says
    // when it holds it.
    const holder = spawn(
      'flock',
      ['--shared', join(tmp.path, '.lock'), 'sh', '-c', 'echo held; sleep 0.4'],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    const exited = new Promise((r) => holder.once('exit', r));
    await new Promise((r) => holder.stdout.once('data', r));
    const began = Date.now();
    const report = await replayCniQueue(options());
    expect(Date.now() - began).toBeGreaterThanOrEqual(200);
    expect(report.replayed).toBe(1);
    await exited;
  });

  it('does nothing (and takes no lock) when the queue is empty or missing', async () => {
    expect(await replayCniQueue({ ...options(), dir: join(tmp.path, 'new') })).toEqual({
      replayed: 0,
      failed: 0,
      dropped: 0,
    });
    expect(handled).toHaveLength(0);
  });

  it('replays again at an interval, reporting each replay, until stopped', async () => {
    await writeFile(join(tmp.path, 'a.del'), queued('c1'));
    let repeat: { stop(): void } | undefined;
    const first = new Promise<ReplayReport>((resolve) => {
      repeat = repeatCniQueueReplay({ ...options(), intervalMs: 5, onReport: resolve });
    });
    expect(await first).toEqual({ replayed: 1, failed: 0, dropped: 0 });
    repeat?.stop();
    expect(handled.map((c) => c.containerId)).toEqual(['c1']);
  });
});
