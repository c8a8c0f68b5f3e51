// The notify protocol against a real unix datagram socket: what systemd reads for Type=notify.
import { join } from 'node:path';
import { setTimeout } from 'node:timers/promises';
import { tempDir } from '@allocnet/cni/testing';
import { createAgentLogger } from './logging.js';
import {
  createNotifier,
  listenForNotifications,
  serviceManager,
  socketAddress,
  statusText,
} from './notify.js';
import type { NotifyListener, RestoreProgress } from './notify.js';

let tmp: Awaited<ReturnType<typeof tempDir>>;
let listener: NotifyListener | undefined;

beforeEach(async () => {
  tmp = await tempDir('allocnet-notify-');
});

afterEach(async () => {
  listener?.close();
  listener = undefined;
  await tmp.remove();
});

function logs() {
  const lines: string[] = [];
  const logger = createAgentLogger({
    level: 'info',
    format: 'json',
    stream: { write: (s: string) => lines.push(s) },
  });
  return { lines, logger };
}

describe('socketAddress', () => {
  it('ends a path with NUL and starts an abstract name with one', () => {
    const path = socketAddress('/run/systemd/notify');
    expect(path.length).toBe(2 + '/run/systemd/notify'.length + 1);
    expect(path.addr.readUInt16LE(0)).toBe(1);
    expect(path.addr.subarray(2, path.length).toString()).toBe('/run/systemd/notify\0');
    const abstract = socketAddress('@sd-notify');
    expect(abstract.length).toBe(2 + '@sd-notify'.length);
    expect(abstract.addr.subarray(2, abstract.length).toString()).toBe('\0sd-notify');
  });

  it('refuses what is neither a path nor abstract, and a path too long', () => {
    expect(() => socketAddress('relative')).toThrow(
      'NOTIFY_SOCKET "relative" is neither a path nor @abstract',
    );
    expect(() => socketAddress(`/${'x'.repeat(107)}`)).toThrow('longer than a unix socket path');
  });
});

describe('createNotifier', () => {
  it('does nothing without NOTIFY_SOCKET', () => {
    const notifier = createNotifier({});
    expect(notifier.enabled).toBe(false);
    expect(() => {
      notifier.notify({ READY: '1' });
    }).not.toThrow();
  });

  it('sends the fields as one datagram of KEY=value lines', async () => {
    const path = join(tmp.path, 'notify');
    listener = listenForNotifications(path);
    createNotifier({ NOTIFY_SOCKET: path }).notify({ READY: '1', STATUS: 'two\nlines' });
    expect(await listener.waitFor(() => true, 2000)).toBe('READY=1\nSTATUS=two lines');
  });

  it('throws naming the socket when nobody listens', () => {
    const path = join(tmp.path, 'nobody');
    expect(() => {
      createNotifier({ NOTIFY_SOCKET: path }).notify({ READY: '1' });
    }).toThrow(`sending to NOTIFY_SOCKET ${path} failed (errno 2)`);
  });
});

describe('serviceManager', () => {
  it('says READY=1, then follows the restore in STATUS= until it is done', async () => {
    const path = join(tmp.path, 'notify');
    listener = listenForNotifications(path);
    let progress: RestoreProgress = { total: 3, left: 3, live: 0 };
    const manager = serviceManager({ NOTIFY_SOCKET: path }, logs().logger);
    const stop = manager.ready({ restoreProgress: () => progress }, 5);
    expect(await listener.waitFor((m) => m.startsWith('READY=1'), 2000)).toBe(
      'READY=1\nSTATUS=serving; restoring 0/3 allocations',
    );
    progress = { total: 3, left: 1, live: 2 };
    await listener.waitFor((m) => m.includes('restoring 2/3'), 2000);
    progress = { total: 3, left: 0, live: 3 };
    await listener.waitFor((m) => m === 'STATUS=serving; 3 allocation network(s) ready', 2000);
    // Done: no more updates.
    const seen = listener.messages.length;
    await setTimeout(50);
    await listener.waitFor(() => true, 100);
    expect(listener.messages.length).toBe(seen);
    stop();
  });

  it('logs the first failure to send, once, and never throws', () => {
    const { lines, logger } = logs();
    const manager = serviceManager({ NOTIFY_SOCKET: join(tmp.path, 'gone') }, logger);
    manager.tell({ STATUS: 'a' });
    manager.tell({ STATUS: 'b' });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({
      level: 'warn',
      message: 'could not tell the service manager (NOTIFY_SOCKET)',
    });
  });

  it('runs without it, saying so, when NOTIFY_SOCKET is unusable', () => {
    const { lines, logger } = logs();
    const manager = serviceManager({ NOTIFY_SOCKET: 'relative/path' }, logger);
    manager.tell({ READY: '1' });
    expect(manager.enabled).toBe(false);
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({
        level: 'warn',
        message: 'NOTIFY_SOCKET is unusable; the service manager will not hear from the agent',
        error: 'NOTIFY_SOCKET "relative/path" is neither a path nor @abstract',
      }),
    ]);
  });

  it('does nothing at all without NOTIFY_SOCKET', () => {
    const { lines, logger } = logs();
    const manager = serviceManager({}, logger);
    const stop = manager.ready({ restoreProgress: () => ({ total: 1, left: 1, live: 0 }) });
    manager.tell({ STOPPING: '1' });
    stop();
    expect([manager.enabled, lines]).toEqual([false, []]);
  });
});

describe('statusText', () => {
  it('counts the restore while it runs, then the ready networks', () => {
    expect(statusText({ total: 1000, left: 588, live: 400 })).toBe(
      'serving; restoring 412/1000 allocations',
    );
    expect(statusText({ total: 0, left: 0, live: 0 })).toBe(
      'serving; 0 allocation network(s) ready',
    );
  });
});
