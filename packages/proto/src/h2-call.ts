// gRPC calls over node:http2, without grpc-js: for a program that makes a call or two and exits
// (the CLI). grpc-js costs about 100 ms to load, as much as Node's own start (docs/cli.md); such a
// program needs none of its channel machinery (name resolution, load balancing, retries,
// keepalives). Unary and server-streaming calls only, uncompressed, over one HTTP/2 connection.
// The wire is grpc's PROTOCOL-HTTP2.md:
// - a call is a POST to `/<service>/<method>` with `content-type: application/grpc`,
//   `te: trailers`, `grpc-timeout` for a deadline, and the metadata as headers;
// - each message either way is a flag byte (1: compressed), a 4-byte big-endian length, the bytes;
// - the status comes in the trailers (`grpc-status`, `grpc-message` percent-encoded), or in the
//   response headers alone when the call failed before any message (trailers-only);
// - a response that is not HTTP 200 maps to a status by grpc's http-grpc-status-mapping.md.
// A failed call rejects with a `CallError` shaped as grpc-js's ServiceError (codes.ts).
import http2 from 'node:http2';
import type {
  ClientHttp2Session,
  ClientHttp2Stream,
  IncomingHttpHeaders,
  OutgoingHttpHeaders,
} from 'node:http2';
import net from 'node:net';
import type { status } from '@grpc/grpc-js';
import { statusCode, statusName, statusOfNumber } from './codes.js';
import type { StatusName } from './codes.js';

/** A failed call, as grpc-js's `ServiceError`: `code`, `details` and the trailers as `metadata`. */
export class CallError extends Error {
  readonly code: status;
  readonly details: string;
  readonly metadata: Readonly<Record<string, string>>;

  constructor(name: StatusName | status, details: string, metadata: Record<string, string> = {}) {
    const code = typeof name === 'number' ? name : statusCode(name);
    super(`${code} ${statusName(code)}: ${details}`);
    this.name = 'CallError';
    this.code = code;
    this.details = details;
    this.metadata = metadata;
  }
}

export interface ChannelOptions {
  /**
   * For a TCP target: TLS with this CA (the server's name or address checked against its
   * certificate), and the client's key and certificate when given. Without: plain HTTP/2.
   */
  readonly tls?: {
    readonly ca: Buffer;
    readonly key: Buffer | null;
    readonly cert: Buffer | null;
  };
  /** Metadata sent with every call, lower-case names (`authorization`). */
  readonly metadata?: Readonly<Record<string, string>>;
}

export interface CallOptions {
  /** How long the call may take from now; then it fails with DEADLINE_EXCEEDED. */
  readonly deadlineMs?: number;
  /** Cancels the call: it then fails with CANCELLED. */
  readonly signal?: AbortSignal;
}

export interface H2Channel {
  /**
   * Calls `path` (`/allocnet.v1.OperatorService/ListLeaks`) with one request message; each
   * response message is given to `onMessage` as it comes (a throw there fails the call INTERNAL).
   * Resolves when the call ends OK.
   */
  call(
    path: string,
    request: Uint8Array,
    onMessage: (message: Buffer) => void,
    options?: CallOptions,
  ): Promise<void>;
  /** Closes the connection once its calls are done. */
  close(): void;
}

/** HTTP statuses of a response that is not gRPC's (http-grpc-status-mapping.md). */
const HTTP_STATUS: ReadonlyMap<number, StatusName> = new Map<number, StatusName>([
  [400, 'INTERNAL'],
  [401, 'UNAUTHENTICATED'],
  [403, 'PERMISSION_DENIED'],
  [404, 'UNIMPLEMENTED'],
  [429, 'UNAVAILABLE'],
  [502, 'UNAVAILABLE'],
  [503, 'UNAVAILABLE'],
  [504, 'UNAVAILABLE'],
]);

/** How long a call whose connection went waits for the session to say why. */
const SESSION_END_WAIT_MS = 100;

/** grpc-timeout: at most 8 digits, in milliseconds while they fit, else whole seconds. */
export function grpcTimeout(ms: number): string {
  const whole = Math.max(1, Math.ceil(ms));
  return whole <= 99_999_999 ? `${whole}m` : `${Math.min(Math.ceil(whole / 1000), 99_999_999)}S`;
}

/** One message on the wire: uncompressed, its length, its bytes. */
function framed(message: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(5 + message.length);
  frame[0] = 0;
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

/**
 * The messages in a response's bytes as they come: each is copied out once, when whole (a large
 * message arrives in many chunks; joining them as each came would copy it over and over).
 */
export function frameReader() {
  let chunks: Buffer[] = [];
  let buffered = 0;
  // The whole size of the message begun, prefix included, once its prefix is in.
  let size: number | undefined;
  const joined = (): Buffer => {
    const all = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, buffered);
    chunks = [all];
    return all;
  };
  return {
    add(chunk: Buffer): void {
      chunks.push(chunk);
      buffered += chunk.length;
    },
    /** The next whole message, 'compressed' for one flagged so, or undefined until more comes. */
    next(): Buffer | 'compressed' | undefined {
      if (size === undefined && buffered >= 5) size = 5 + joined().readUInt32BE(1);
      if (size === undefined || buffered < size) return undefined;
      const all = joined();
      if (all[0] !== 0) return 'compressed';
      const message = all.subarray(5, size);
      const rest = all.subarray(size);
      chunks = rest.length === 0 ? [] : [rest];
      buffered = rest.length;
      size = undefined;
      return message;
    },
    buffered: () => buffered,
  };
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function percentDecoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** The call's end as the headers that carry `grpc-status` say it. */
function statusOf(headers: IncomingHttpHeaders): CallError | undefined {
  const code = statusOfNumber(Number(header(headers, 'grpc-status')));
  const metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers))
    if (!name.startsWith(':') && value !== undefined)
      metadata[name] = Array.isArray(value) ? value.join(', ') : value;
  const details = percentDecoded(header(headers, 'grpc-message') ?? '');
  if (code === undefined)
    return new CallError('UNKNOWN', `the server sent grpc-status ${JSON.stringify(header(headers, 'grpc-status'))}`, metadata); // prettier-ignore
  return code === statusCode('OK') ? undefined : new CallError(code, details, metadata);
}

function sessionTo(target: string, tls: ChannelOptions['tls']): ClientHttp2Session {
  if (target.startsWith('unix:')) {
    const rest = target.slice('unix:'.length);
    const path = rest.startsWith('//') ? rest.slice(2) : rest;
    return http2.connect('http://localhost', { createConnection: () => net.connect(path) });
  }
  if (tls === undefined) return http2.connect(`http://${target}`);
  return http2.connect(`https://${target}`, {
    ca: tls.ca,
    ...(tls.key === null ? {} : { key: tls.key }),
    ...(tls.cert === null ? {} : { cert: tls.cert }),
  });
}

/** What a call has heard so far. */
interface CallState {
  /** Its end: a status read, or a failure decided here. */
  ended: CallError | 'ok' | undefined;
  httpStatus: number | undefined;
  streamError: Error | undefined;
  readonly frames: ReturnType<typeof frameReader>;
}

/** Reads a call's answer into `state`: its headers, messages (to `onMessage`) and trailers. */
function readResponse(
  stream: ClientHttp2Stream,
  state: CallState,
  onMessage: (message: Buffer) => void,
  fail: (error: CallError) => void,
): void {
  stream.on('response', (h) => {
    state.httpStatus = Number(h[':status']);
    if (h['grpc-status'] !== undefined) state.ended ??= statusOf(h) ?? 'ok';
  });
  stream.on('trailers', (h: IncomingHttpHeaders) => {
    state.ended ??= statusOf(h) ?? 'ok';
  });
  stream.on('data', (chunk: Buffer) => {
    state.frames.add(chunk);
    for (let message = state.frames.next(); message !== undefined; message = state.frames.next()) {
      if (state.ended !== undefined) return;
      if (message === 'compressed') {
        fail(new CallError('INTERNAL', 'the server sent a compressed message, never asked for'));
        return;
      }
      try {
        onMessage(message);
      } catch (error) {
        fail(
          new CallError(
            'INTERNAL',
            `a response message could not be taken: ${error instanceof Error ? error.message : String(error)}`,
          ),
        );
      }
    }
  });
  stream.on('error', (error: Error) => {
    state.streamError = error;
  });
}

/**
 * A connection to `target`, as `agentTarget` gives it (`unix:///run/allocnet/agent.sock`,
 * `host:port`), made at once; a connect that fails fails its calls UNAVAILABLE.
 */
export function openH2Channel(target: string, options: ChannelOptions = {}): H2Channel {
  const session = sessionTo(target, options.tls);
  // A connection that fails closes its streams first and says why (its 'error', if it knows)
  // after: a call that ended for want of it waits for the session's end, or a moment.
  let sessionError: Error | undefined;
  let sessionEnded = false;
  const onSessionEnd: (() => void)[] = [];
  const sessionEnd = (): void => {
    sessionEnded = true;
    for (const settle of onSessionEnd.splice(0)) settle();
  };
  session.on('error', (error: Error) => {
    sessionError = error;
    sessionEnd();
  });
  session.on('close', sessionEnd);
  const metadata = options.metadata ?? {};

  function call(
    path: string,
    request: Uint8Array,
    onMessage: (message: Buffer) => void,
    { deadlineMs, signal }: CallOptions = {},
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted === true) {
        reject(new CallError('CANCELLED', 'Cancelled on client'));
        return;
      }
      const headers: OutgoingHttpHeaders = {
        ...metadata,
        ':method': 'POST',
        ':path': path,
        'content-type': 'application/grpc',
        te: 'trailers',
        ...(deadlineMs === undefined ? {} : { 'grpc-timeout': grpcTimeout(deadlineMs) }),
      };
      const state: CallState = {
        ended: undefined,
        httpStatus: undefined,
        streamError: undefined,
        frames: frameReader(),
      };
      let stream: ClientHttp2Stream;
      try {
        stream = session.request(headers);
      } catch (error) {
        // The session is gone (its connection failed or closed): no call can start on it.
        const why = sessionError ?? (error instanceof Error ? error : new Error(String(error)));
        reject(
          new CallError('UNAVAILABLE', `No connection established. Last error: ${why.message}`),
        );
        return;
      }
      const fail = (error: CallError): void => {
        state.ended ??= error;
        stream.close(http2.constants.NGHTTP2_CANCEL);
      };
      const timer =
        deadlineMs === undefined
          ? undefined
          : setTimeout(() => {
              fail(new CallError('DEADLINE_EXCEEDED', `Deadline exceeded after ${deadlineMs} ms`));
            }, deadlineMs);
      const onAbort = (): void => {
        fail(new CallError('CANCELLED', 'Cancelled on client'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });

      readResponse(stream, state, onMessage, fail);
      let settled = false;
      const settle = (): void => {
        if (settled) return;
        settled = true;
        const { frames } = state;
        const end =
          state.ended ??
          closedWithout(
            state.httpStatus,
            stream.rstCode,
            session.destroyed,
            sessionError ?? state.streamError,
          );
        if (end === 'ok' && frames.buffered() > 0)
          reject(new CallError('INTERNAL', `the call ended inside a message (${frames.buffered()} bytes)`)); // prettier-ignore
        else if (end === 'ok') resolve();
        else reject(end);
      };
      stream.on('close', () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const unanswered = state.ended === undefined && state.httpStatus === undefined;
        if (unanswered && session.destroyed && !sessionEnded) {
          onSessionEnd.push(settle);
          setTimeout(settle, SESSION_END_WAIT_MS);
        } else settle();
      });
      stream.end(framed(request));
    });
  }

  return {
    call,
    close() {
      session.close();
    },
  };
}

/** Why a call ended without a status: not gRPC's answer, no connection, or the stream reset. */
function closedWithout(
  httpStatus: number | undefined,
  rstCode: number | undefined,
  connectionLost: boolean,
  error: Error | undefined,
): CallError {
  if (httpStatus !== undefined && httpStatus !== 200)
    return new CallError(HTTP_STATUS.get(httpStatus) ?? 'UNKNOWN', `HTTP status ${httpStatus}`);
  // No answer, and the connection failed or went (as grpc-js says a dropped connection).
  if (httpStatus === undefined && (error !== undefined || connectionLost))
    return new CallError(
      'UNAVAILABLE',
      error === undefined
        ? 'the connection closed before an answer'
        : `No connection established. Last error: ${error.message}`,
    );
  if (rstCode === http2.constants.NGHTTP2_REFUSED_STREAM)
    return new CallError('UNAVAILABLE', 'the server refused the stream');
  if (rstCode !== undefined && rstCode !== http2.constants.NGHTTP2_NO_ERROR)
    return new CallError('INTERNAL', `Received RST_STREAM with code ${rstCode}`);
  return new CallError('UNKNOWN', `the call ended without a status${error === undefined ? '' : `: ${error.message}`}`); // prettier-ignore
}
