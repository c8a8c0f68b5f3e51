// A long-lived helper process in a node namespace that takes one JSON request a line on stdin and
// answers each with one JSON line carrying the request's `seq` back, in the order they finish:
// gocni-driver's `serve` and suite-inner.js speak it. Requests may overlap (the concurrent
// scenario sends W at once); answers are matched by `seq`. When the process exits or cannot
// start, every request waiting and every later one fails with `driver-ended`, naming what it
// wrote on stderr.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { BenchError, messageOf } from './errors.js';

export interface LineServer {
  /** Sends `request` with the next `seq`; resolves to its answer line, parsed. */
  request(request: Readonly<Record<string, unknown>>): Promise<Record<string, unknown>>;
  /** Ends its input and waits for it to answer what is under way and exit; resolves its stderr. */
  stop(): Promise<string>;
}

/** Starts `argv` (`nsenter --net=<node> -- …`); `name` is how errors call it. */
export function startLineServer(name: string, argv: readonly string[]): LineServer {
  const [file, ...args] = argv;
  if (file === undefined) throw new Error('startLineServer: empty argv');
  const child = spawn(file, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const waiting = new Map<number, { resolve: (a: Record<string, unknown>) => void; reject: (e: Error) => void }>(); // prettier-ignore
  let gone: string | undefined;
  const failure = () =>
    new BenchError(`${name} ${gone ?? 'ended'} with calls unanswered: ${stderr.trim()}`, {
      code: 'driver-ended',
    });
  const end = (why: string) => {
    gone ??= why;
    for (const w of waiting.values()) w.reject(failure());
    waiting.clear();
  };
  const closed = new Promise<void>((done) => {
    child.once('close', (code, signal) => {
      end(`exited ${signal ?? String(code)}`);
      done();
    });
  });
  child.once('error', (error) => {
    end(`could not start (${messageOf(error)})`);
  });
  // Writing to a process that just exited fails with EPIPE; 'close' answers the callers.
  child.stdin.on('error', (error) => {
    end(`stopped reading its input (${messageOf(error)})`);
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    const answer = JSON.parse(line) as Record<string, unknown>;
    const seq = Number(answer.seq);
    waiting.get(seq)?.resolve(answer);
    waiting.delete(seq);
  });
  let seq = 0;
  return {
    request(request) {
      if (gone !== undefined) return Promise.reject(failure());
      const mine = ++seq;
      return new Promise((resolve, reject) => {
        waiting.set(mine, { resolve, reject });
        child.stdin.write(`${JSON.stringify({ ...request, seq: mine })}\n`);
      });
    },
    async stop() {
      if (gone === undefined) child.stdin.end();
      await closed;
      return stderr;
    },
  };
}
