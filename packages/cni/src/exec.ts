import { execa } from 'execa';

/** One plugin process to run. `env` is the whole environment: nothing is inherited. */
export interface PluginExecRequest {
  readonly path: string;
  readonly stdin: string;
  readonly env: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
}

/** How a plugin process ended. A non-zero exit is a result; `failed` means it did not run to an end. */
export type PluginExecResult =
  | {
      readonly kind: 'exited';
      readonly exitCode: number;
      readonly stdout: string;
      readonly stderr: string;
    }
  | {
      readonly kind: 'failed';
      readonly reason: 'spawn' | 'timeout' | 'aborted' | 'killed';
      readonly message: string;
      readonly stdout: string;
      readonly stderr: string;
    };

/** The seam between the runtime and processes (libcni's `Exec`). */
export interface PluginExec {
  exec(request: PluginExecRequest): Promise<PluginExecResult>;
}

export interface ExecaPluginExecOptions {
  /**
   * Run plugins inside this network namespace (a name under /run/netns, or /run/netns/<name>)
   * through `ip netns exec`, which also gives them that namespace's /sys. Default: this
   * process's namespace. Tests and benchmarks use it for the namespace that stands for the node.
   */
  readonly netns?: string;
  /** Fresh spawns after ETXTBSY ("text file busy": the binary is still open for writing). Default 5. */
  readonly textBusyRetries?: number;
  /** Wait between those spawns. Default 100 ms. */
  readonly textBusyDelayMs?: number;
  /** How to wait; tests pass one that resolves when they are ready. */
  readonly sleep?: (ms: number) => Promise<void>;
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function netnsName(netns: string): string {
  const name = netns.startsWith('/run/netns/') ? netns.slice('/run/netns/'.length) : netns;
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(name)) {
    throw new RangeError(`netns ${JSON.stringify(netns)} is not a name under /run/netns`);
  }
  return name;
}

/**
 * The real `PluginExec`, on execa: the plugin path is the whole argv, stdin is the request's, the
 * environment is exactly the request's, and the process is killed (SIGKILL) at the timeout or
 * when the signal aborts.
 */
export function createExecaPluginExec(options: ExecaPluginExecOptions = {}): PluginExec {
  const prefix =
    options.netns === undefined ? [] : ['ip', 'netns', 'exec', netnsName(options.netns)];
  const retries = options.textBusyRetries ?? 5;
  const delayMs = options.textBusyDelayMs ?? 100;
  const sleep = options.sleep ?? defaultSleep;

  async function once(
    request: PluginExecRequest,
  ): Promise<PluginExecResult & { textBusy: boolean }> {
    const [file, ...args] = [...prefix, request.path];
    const result = await execa(file, args, {
      input: request.stdin,
      env: { ...request.env },
      extendEnv: false,
      reject: false,
      stripFinalNewline: false,
      timeout: request.timeoutMs,
      killSignal: 'SIGKILL',
      ...(request.signal === undefined ? {} : { cancelSignal: request.signal }),
    });
    const stdout = typeof result.stdout === 'string' ? result.stdout : '';
    const stderr = typeof result.stderr === 'string' ? result.stderr : '';
    if (result.isCanceled)
      return {
        kind: 'failed',
        reason: 'aborted',
        message: 'cancelled',
        stdout,
        stderr,
        textBusy: false,
      };
    if (result.timedOut) {
      return {
        kind: 'failed',
        reason: 'timeout',
        message: `killed after ${request.timeoutMs} ms`,
        stdout,
        stderr,
        textBusy: false,
      };
    }
    if (result.exitCode === undefined) {
      if (result.signal !== undefined) {
        return {
          kind: 'failed',
          reason: 'killed',
          message: `killed by ${result.signal}`,
          stdout,
          stderr,
          textBusy: false,
        };
      }
      const code = (result.cause as NodeJS.ErrnoException | undefined)?.code;
      return {
        kind: 'failed',
        reason: 'spawn',
        message: result.originalMessage ?? 'did not start',
        stdout,
        stderr,
        textBusy: code === 'ETXTBSY',
      };
    }
    return { kind: 'exited', exitCode: result.exitCode, stdout, stderr, textBusy: false };
  }

  return {
    async exec(request) {
      for (let attempt = 0; ; attempt++) {
        const { textBusy, ...result } = await once(request);
        if (!textBusy || attempt >= retries) return result;
        // The binary is being written (an upgrade in progress); a fresh spawn after a short
        // wait usually finds it complete. libcni retries the same way (it waits 1 s).
        await sleep(delayMs);
      }
    },
  };
}
