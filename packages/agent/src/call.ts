// How every RPC runs: an AbortSignal that fires at the client's deadline or when the call is
// cancelled, the work, any error mapped to a status (status.ts), a failure counted in the
// metrics, and one log line: `{op, allocId, network, durationMs, attempts, outcome, code, error}`.
import * as grpc from '@grpc/grpc-js';
import type { AbortCause } from '@allocnet/proto';
import { invalidRequest, messageOf, show } from './errors.js';
import type { AgentLogger } from './logging.js';
import type { AgentMetrics } from './metrics.js';
import { isPreEncoded, preEncodedBytes } from './sliced-encode.js';
import { grpcFailure, protoField, statusName } from './status.js';

/** What every server call has (grpc-js does not export its `ServerSurfaceCall`). */
export type SurfaceCall = Pick<
  grpc.ServerUnaryCall<unknown, unknown>,
  'getDeadline' | 'on' | 'removeListener'
>;

/** What one call's log line says, filled in as the call learns it. */
export interface LogFields {
  allocId?: string;
  network?: string;
  attempts?: number;
  [key: string]: unknown;
}

export interface CallContext {
  readonly signal: AbortSignal;
  readonly fields: LogFields;
}

/** Runs after the call with its status and duration: for metrics that need the fields. */
export type AfterCall = (code: grpc.status, seconds: number, fields: LogFields) => void;

export type CallOutcome<T> = { ok: true; value: T } | { ok: false; error: grpc.StatusObject };

/** Handles calls (deadline signal, status, log line, failure metric); `unary` makes a grpc-js handler of one. */
export interface CallHandler {
  readonly serve: <T>(
    op: string,
    call: SurfaceCall,
    level: 'info' | 'debug',
    work: (ctx: CallContext) => Promise<T>,
    after?: AfterCall,
  ) => Promise<CallOutcome<T>>;
  readonly unary: <Req, Res>(
    op: string,
    level: 'info' | 'debug',
    work: (request: Req, ctx: CallContext) => Promise<Res>,
    after?: AfterCall,
  ) => grpc.handleUnaryCall<Req, Res>;
  /** RPCs running now. */
  readonly inFlight: () => number;
}

export interface CallHandlerOptions {
  readonly metrics: Pick<AgentMetrics, 'failure'>;
  readonly logger: AgentLogger;
  /** True once the agent is stopping: a call cancelled then was cut by the shutdown. */
  readonly stopping: () => boolean;
  /** Default performance.now. */
  readonly now?: () => number;
  /** Marks each call begun; what it returns marks it ended. */
  readonly activity?: () => () => void;
}

/**
 * A signal for one call: aborted when the client's deadline passes (DEADLINE_EXCEEDED) or the
 * call is cancelled (the client went away, or a forced shutdown cut it).
 */
function callSignal(
  call: SurfaceCall,
  stopping: () => boolean,
): { signal: AbortSignal; cause: () => AbortCause | undefined; dispose: () => void } {
  const controller = new AbortController();
  let cause: AbortCause | undefined;
  const abort = (why: AbortCause) => {
    if (controller.signal.aborted) return;
    cause = why;
    controller.abort(new Error(`the call was aborted: ${why}`));
  };
  const deadline = call.getDeadline();
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  let timer: NodeJS.Timeout | undefined;
  if (Number.isFinite(at)) {
    const ms = at - Date.now();
    if (ms <= 0) abort('deadline');
    // A deadline beyond setTimeout's range is as good as none.
    else if (ms < 2_147_483_647)
      timer = setTimeout(() => {
        abort('deadline');
      }, ms);
  }
  const onCancel = () => {
    // At the deadline the client resets the stream as grpc-js's own deadline timer ends it: a
    // cancellation this close to the deadline is the deadline (the margin covers the transit
    // time between the client's clock and this one).
    if (Number.isFinite(at) && Date.now() >= at - 100) abort('deadline');
    else abort(stopping() ? 'shutdown' : 'cancelled');
  };
  call.on('cancelled', onCancel);
  return {
    signal: controller.signal,
    cause: () => cause,
    dispose() {
      if (timer !== undefined) clearTimeout(timer);
      call.removeListener('cancelled', onCancel);
    },
  };
}

const UNDECODABLE = Symbol('allocnet.undecodable');

/**
 * The service with deserializers that never throw: grpc-js answers INTERNAL for a request its
 * deserializer cannot read (hard-coded), where the client sent bad bytes; this one hands the
 * handler a marker instead, and `requestOf` answers INVALID_ARGUMENT for it.
 */
export function tolerantService(service: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(service)) {
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer): unknown => {
        try {
          return method.requestDeserialize(bytes) as unknown;
        } catch (error) {
          return { [UNDECODABLE]: messageOf(error) };
        }
      },
      // A response encoded in slices beforehand (sliced-encode.ts) goes out as it is.
      responseSerialize: (value: unknown): Buffer =>
        isPreEncoded(value) ? preEncodedBytes(value) : method.responseSerialize(value),
    };
  }
  return out;
}

/** The request, or INVALID_ARGUMENT when its bytes could not be decoded as the method's message. */
export function requestOf<Req>(request: Req): Req {
  const bad = (request as Record<symbol, unknown> | null)?.[UNDECODABLE];
  if (typeof bad === 'string')
    throw invalidRequest(['request'], [`could not be decoded: ${bad}`], protoField);
  return request;
}

/** A string from a request, for a log line: at most 80 characters. */
export function cut(text: string): string {
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** The allocation id a request names, for the log line (quoted and cut when it is odd). */
export function idForLog(value: unknown): string | undefined {
  if (typeof value !== 'string' || value === '') return undefined;
  return /^[A-Za-z0-9_.-]{1,64}$/.test(value) ? value : show(value);
}

export function createCallHandler(options: CallHandlerOptions): CallHandler {
  const { metrics, logger } = options;
  const now = options.now ?? (() => performance.now());
  let running = 0;

  /** Runs one call: signal, decode, work, status, metrics and the log line. */
  async function serve<T>(
    op: string,
    call: SurfaceCall,
    level: 'info' | 'debug',
    work: (ctx: CallContext) => Promise<T>,
    after?: AfterCall,
  ): Promise<CallOutcome<T>> {
    running++;
    const ended = options.activity?.();
    const began = now();
    const { signal, cause, dispose } = callSignal(call, options.stopping);
    const fields: LogFields = {};
    try {
      const value = await work({ signal, fields });
      const seconds = (now() - began) / 1000;
      after?.(grpc.status.OK, seconds, fields);
      logger[level](op, {
        op,
        ...fields,
        durationMs: Math.round(seconds * 1000),
        outcome: 'ok',
      });
      return { ok: true, value };
    } catch (error) {
      const failure = grpcFailure(error, cause());
      const seconds = (now() - began) / 1000;
      const code = statusName(failure.code);
      metrics.failure(op, code);
      const attempts = failure.metadata['allocnet-attempts'];
      if (attempts !== undefined && fields.attempts === undefined)
        fields.attempts = Number(attempts);
      after?.(failure.code, seconds, fields);
      // The caller's mistakes are theirs to act on; the agent's failures are the operator's.
      const serious =
        failure.code === grpc.status.INTERNAL ||
        failure.code === grpc.status.UNAVAILABLE ||
        failure.code === grpc.status.UNKNOWN;
      logger[serious ? 'error' : level === 'debug' ? 'debug' : 'info'](op, {
        op,
        ...fields,
        durationMs: Math.round(seconds * 1000),
        outcome: 'failed',
        code,
        error: failure.details,
      });
      const metadata = new grpc.Metadata();
      for (const [k, v] of Object.entries(failure.metadata)) metadata.set(k, v);
      return { ok: false, error: { code: failure.code, details: failure.details, metadata } };
    } finally {
      dispose();
      running--;
      ended?.();
    }
  }

  return {
    serve,
    unary: (op, level, work, after) => (call, callback) => {
      void serve(op, call, level, (ctx) => work(requestOf(call.request), ctx), after).then(
        (result) => {
          if (result.ok) callback(null, result.value);
          else callback(result.error);
        },
      );
    },
    inFlight: () => running,
  };
}
