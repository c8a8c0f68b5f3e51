// systemd's notify protocol (sd_notify(3)), for the unit's Type=notify: one datagram of
// `KEY=value` lines to the unix socket in $NOTIFY_SOCKET. READY=1 once the agent serves (the
// DEL queue replayed), STATUS= while the restore runs and after, STOPPING=1 on SIGTERM.
//
// Sent from the agent's own process through koffi (already loaded for posix_spawn and flock):
// systemd takes a message only from the unit's main PID by default (NotifyAccess=main), and
// `systemd-notify`, a child, is rejected, or lost when it exits before systemd looks it up.
// Node has no unix datagram socket of its own.
import { setTimeout } from 'node:timers/promises';
import { bindLibc } from '@allocnet/libc';
import { messageOf } from './errors.js';
import type { AgentLogger } from './logging.js';

const AF_UNIX = 1;
const SOCK_DGRAM = 2;
const SOCK_CLOEXEC = 0o2000000;
const MSG_NOSIGNAL = 0x4000;
/** `sockaddr_un`'s path field: 108 bytes on Linux. */
const SUN_PATH_BYTES = 108;

const load = bindLibc<{
  readonly socket: (domain: number, type: number, protocol: number) => number;
  readonly sendto: (
    fd: number,
    buf: Buffer,
    len: number,
    flags: number,
    addr: Buffer,
    addrlen: number,
  ) => number;
  readonly close: (fd: number) => number;
  readonly bind: (fd: number, addr: Buffer, addrlen: number) => number;
  readonly recv: (fd: number, buf: Buffer, len: number, flags: number) => number;
}>({
  socket: 'int socket(int domain, int type, int protocol)',
  sendto:
    'intptr_t sendto(int fd, const void *buf, size_t len, int flags, const void *addr, uint32_t addrlen)',
  close: 'int close(int fd)',
  bind: 'int bind(int fd, const void *addr, uint32_t addrlen)',
  recv: 'intptr_t recv(int fd, _Out_ void *buf, size_t len, int flags)',
});

/**
 * `sockaddr_un` for `path` and its length: a path starting with `@` is in the abstract
 * namespace (its first byte NUL, no NUL at the end), as sd_notify reads it.
 */
export function socketAddress(path: string): { readonly addr: Buffer; readonly length: number } {
  if (!path.startsWith('/') && !path.startsWith('@'))
    throw new Error(`NOTIFY_SOCKET ${JSON.stringify(path)} is neither a path nor @abstract`);
  const name = Buffer.from(path, 'utf8');
  if (path.startsWith('@')) name[0] = 0;
  // A path needs its NUL; an abstract name is its bytes exactly.
  const bytes = name.length + (path.startsWith('@') ? 0 : 1);
  if (bytes > SUN_PATH_BYTES)
    throw new Error(
      `NOTIFY_SOCKET ${JSON.stringify(path)} is longer than a unix socket path can be`,
    );
  const addr = Buffer.alloc(2 + SUN_PATH_BYTES);
  addr.writeUInt16LE(AF_UNIX, 0);
  name.copy(addr, 2);
  return { addr, length: 2 + bytes };
}

/** Where the agent tells its service manager how it is. */
export interface Notifier {
  /** Whether $NOTIFY_SOCKET was set: without it every call does nothing. */
  readonly enabled: boolean;
  /** Sends `fields` as one message. Throws when the socket cannot be reached. */
  notify(fields: Readonly<Record<string, string>>): void;
}

/** The notifier for `env`'s NOTIFY_SOCKET (a systemd unit of Type=notify sets it). */
export function createNotifier(env: Readonly<Record<string, string | undefined>>): Notifier {
  const path = env.NOTIFY_SOCKET;
  if (path === undefined || path === '') return { enabled: false, notify: () => undefined };
  const { addr, length } = socketAddress(path);
  return {
    enabled: true,
    notify(fields) {
      const text = Object.entries(fields)
        .map(([key, value]) => `${key}=${value.replace(/\n/g, ' ')}`)
        .join('\n');
      const { socket, sendto, close, errno } = load();
      const fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd < 0) throw new Error(`socket(AF_UNIX, SOCK_DGRAM) failed (errno ${errno()})`);
      try {
        const message = Buffer.from(text, 'utf8');
        const sent = sendto(fd, message, message.length, MSG_NOSIGNAL, addr, length);
        if (sent < 0) throw new Error(`sending to NOTIFY_SOCKET ${path} failed (errno ${errno()})`);
      } finally {
        close(fd);
      }
    },
  };
}

/** How far the restore after the start is: allocations in all, and those not settled yet. */
export interface RestoreProgress {
  readonly total: number;
  readonly left: number;
  /** Allocation networks ready now. */
  readonly live: number;
}

/** The STATUS= text for `progress`: `restoring 412/1000` while it runs, then what serves. */
export function statusText(progress: RestoreProgress): string {
  if (progress.left > 0)
    return `serving; restoring ${progress.total - progress.left}/${progress.total} allocations`;
  return `serving; ${progress.live} allocation network(s) ready`;
}

/** How often STATUS= follows the restore while it runs. */
export const STATUS_INTERVAL_MS = 1000;

/** The service manager as the agent's command uses it (`serviceManager`). */
export interface ServiceManager {
  readonly enabled: boolean;
  /** Sends `fields`; a failure is logged (the first one only), never thrown. */
  tell(fields: Readonly<Record<string, string>>): void;
  /**
   * READY=1 with the STATUS=, then STATUS= every `intervalMs` until the restore is done.
   * Returns what stops the updates.
   */
  ready(agent: { restoreProgress(): RestoreProgress }, intervalMs?: number): () => void;
}

/**
 * The service manager for `env`'s NOTIFY_SOCKET; does nothing without one. Only the first
 * failure to send is logged: a unit whose socket went away must not fill the log every second.
 */
export function serviceManager(
  env: Readonly<Record<string, string | undefined>>,
  logger: AgentLogger,
): ServiceManager {
  let notifier: Notifier;
  try {
    notifier = createNotifier(env);
  } catch (error) {
    // A service manager that set a socket we cannot use: run, and say so, rather than not start.
    logger.warn('NOTIFY_SOCKET is unusable; the service manager will not hear from the agent', {
      error: messageOf(error),
    });
    notifier = { enabled: false, notify: () => undefined };
  }
  let warned = false;
  const tell = (fields: Readonly<Record<string, string>>) => {
    try {
      notifier.notify(fields);
    } catch (error) {
      if (warned) return;
      warned = true;
      logger.warn('could not tell the service manager (NOTIFY_SOCKET)', {
        error: messageOf(error),
      });
    }
  };
  return {
    enabled: notifier.enabled,
    tell,
    ready(agent, intervalMs = STATUS_INTERVAL_MS) {
      if (!notifier.enabled) return () => undefined;
      const first = agent.restoreProgress();
      tell({ READY: '1', STATUS: statusText(first) });
      if (first.left === 0) return () => undefined;
      const timer = setInterval(() => {
        const progress = agent.restoreProgress();
        tell({ STATUS: statusText(progress) });
        if (progress.left === 0) clearInterval(timer);
      }, intervalMs);
      timer.unref();
      return () => {
        clearInterval(timer);
      };
    },
  };
}

const MSG_DONTWAIT = 0x40;
const EAGAIN = 11;
const MAX_MESSAGE_BYTES = 4096;

/** The other end of the protocol, as a service manager has it (`listenForNotifications`). */
export interface NotifyListener {
  /** The messages received so far, each as its `KEY=value` lines. */
  readonly messages: readonly string[];
  /** Resolves with the first message `match` accepts (received before or after the call). */
  waitFor(match: (message: string) => boolean, timeoutMs: number): Promise<string>;
  close(): void;
}

/**
 * Binds a unix datagram socket at `path` (a file path) and collects what is sent to it: what
 * systemd does for a Type=notify unit, for tests and for supervising the agent without systemd.
 */
export function listenForNotifications(path: string, pollMs = 10): NotifyListener {
  const { socket, bind, recv, close, errno } = load();
  const { addr, length } = socketAddress(path);
  const fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw new Error(`socket(AF_UNIX, SOCK_DGRAM) failed (errno ${errno()})`);
  if (bind(fd, addr, length) !== 0) {
    const err = errno();
    close(fd);
    throw new Error(`binding ${path} failed (errno ${err})`);
  }
  const messages: string[] = [];
  const buffer = Buffer.alloc(MAX_MESSAGE_BYTES);
  let closed = false;
  const drain = () => {
    for (;;) {
      const n = recv(fd, buffer, buffer.length, MSG_DONTWAIT);
      if (n < 0) {
        if (errno() !== EAGAIN) throw new Error(`recv on ${path} failed (errno ${errno()})`);
        return;
      }
      messages.push(buffer.subarray(0, n).toString('utf8'));
    }
  };
  const timer = setInterval(drain, pollMs);
  return {
    messages,
    async waitFor(match, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (!closed) drain();
        const found = messages.find(match);
        if (found !== undefined) return found;
        if (Date.now() > deadline)
          throw new Error(
            `no message on ${path} matched within ${timeoutMs} ms; got ${JSON.stringify(messages)}`,
          );
        await setTimeout(pollMs);
      }
    },
    close() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      close(fd);
    },
  };
}
