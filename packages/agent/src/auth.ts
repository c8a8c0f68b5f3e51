// Who may call what over TCP. The unix socket (0600 in a 0700 directory: root only) grants
// everything and has no interceptor. Over TCP, every call carries an identity or is refused:
// - a client certificate (verified against tcp.tls.clientCa by TLS itself) whose subject OU is
//   `operator` or `scheduler` gives that role;
// - a bearer token (`authorization: Bearer <token>`) equal to the one in tcp.operatorTokenFile
//   gives the operator role (compared in constant time).
// The scheduler may use AllocNetworkService; the operator everything; health needs no role.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { PeerCertificate } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { ALLOC_NETWORK_SERVICE, OPERATOR_SERVICE } from '@allocnet/proto';
import type { AgentLogger } from './logging.js';

export type Role = 'operator' | 'scheduler';

export interface Identity {
  readonly role: Role;
  readonly via: 'certificate' | 'token';
  /** The certificate's subject CN, or `token`. */
  readonly name: string;
}

/** grpc-js's `AuthContext` (not exported by its index): what TLS knows of the peer. */
export interface PeerAuthContext {
  readonly transportSecurityType?: string;
  /** Present when the client presented a certificate that TLS verified. */
  readonly sslPeerCertificate?: Pick<PeerCertificate, 'subject'> | undefined;
}

/** What identification reads from a call: grpc-js's auth context and the authorization header. */
export interface CallCredentials {
  /** `call.getAuthContext()`: the TLS peer certificate when the client presented one. */
  readonly authContext: PeerAuthContext;
  /** The `authorization` metadata value, if any. */
  readonly authorization: string | undefined;
}

export type Decision =
  | { readonly allowed: true; readonly identity: Identity | undefined }
  | { readonly allowed: false; readonly code: grpc.status; readonly details: string };

const HEALTH_SERVICE = 'grpc.health.v1.Health';

/** `/pkg.Service/Method` → `pkg.Service`. */
function serviceOf(path: string): string {
  return path.split('/')[1] ?? '';
}

function ous(subject: Record<string, string | string[] | undefined> | undefined): string[] {
  const ou = subject?.OU;
  if (ou === undefined) return [];
  return Array.isArray(ou) ? ou : [ou];
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Equal tokens, in time that does not depend on where they differ (or on their lengths). */
export function tokensEqual(given: string, expected: string): boolean {
  // Hashing first makes both sides 32 bytes, so timingSafeEqual never sees different lengths
  // and the time taken says nothing about the expected token's length.
  return timingSafeEqual(sha256(given), sha256(expected));
}

/**
 * Identifies the caller: the bearer token first (it is explicit, and a wrong one is refused even
 * when the certificate would do), then the certificate's OU. Undefined identity: none was given.
 */
export function identify(
  credentials: CallCredentials,
  operatorToken: string | undefined,
): { ok: true; identity: Identity | undefined } | { ok: false; details: string } {
  const header = credentials.authorization;
  if (header !== undefined) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (m?.[1] === undefined)
      return { ok: false, details: 'the authorization header is not "Bearer <token>"' };
    if (operatorToken === undefined)
      return {
        ok: false,
        details: 'this agent accepts no bearer tokens (tcp.operatorTokenFile is not set)',
      };
    if (!tokensEqual(m[1], operatorToken))
      return { ok: false, details: 'the bearer token is not valid' };
    return { ok: true, identity: { role: 'operator', via: 'token', name: 'token' } };
  }
  const cert = credentials.authContext.sslPeerCertificate;
  if (cert === undefined) return { ok: true, identity: undefined };
  const subject = cert.subject as Record<string, string | string[] | undefined> | undefined;
  const units = ous(subject);
  const cn = subject?.CN;
  const name = typeof cn === 'string' ? cn : Array.isArray(cn) ? (cn[0] ?? '') : '';
  const role: Role | undefined = units.includes('operator')
    ? 'operator'
    : units.includes('scheduler')
      ? 'scheduler'
      : undefined;
  if (role === undefined)
    return {
      ok: false,
      details: `client certificate ${JSON.stringify(name)} has no allocnet role (subject OU "operator" or "scheduler")`,
    };
  return { ok: true, identity: { role, via: 'certificate', name } };
}

/** Whether `identity` may call `path` (`/allocnet.v1.OperatorService/ReapLeaks`). */
export function authorize(path: string, identity: Identity | undefined): Decision {
  const service = serviceOf(path);
  // Health is a probe (load balancers, systemd, monitoring): TLS already checked the client.
  if (service === HEALTH_SERVICE) return { allowed: true, identity };
  if (identity === undefined)
    return {
      allowed: false,
      code: grpc.status.UNAUTHENTICATED,
      details: `${service} over TCP needs a client certificate with an allocnet role (OU "scheduler" or "operator") or an operator bearer token`,
    };
  if (service === OPERATOR_SERVICE && identity.role !== 'operator')
    return {
      allowed: false,
      code: grpc.status.PERMISSION_DENIED,
      details: `${OPERATOR_SERVICE} needs the operator role; ${JSON.stringify(identity.name)} has the ${identity.role} role`,
    };
  if (service === ALLOC_NETWORK_SERVICE || service === OPERATOR_SERVICE)
    return { allowed: true, identity };
  // Reflection and anything else (which answers UNIMPLEMENTED): any identified caller.
  return { allowed: true, identity };
}

/** identify, then authorize; health is answered to any client the transport let in. */
export function decide(
  path: string,
  credentials: CallCredentials,
  operatorToken: string | undefined,
): Decision {
  if (serviceOf(path) === HEALTH_SERVICE) return { allowed: true, identity: undefined };
  const who = identify(credentials, operatorToken);
  if (!who.ok) return { allowed: false, code: grpc.status.UNAUTHENTICATED, details: who.details };
  return authorize(path, who.identity);
}

export interface AuthInterceptorOptions {
  /** The operator token now (re-read on reload); undefined when none is configured. */
  readonly operatorToken: () => string | undefined;
  readonly logger: AgentLogger;
}

/**
 * The TCP server's interceptor: decides on the request's metadata, before the request message is
 * read or any handler runs; a refused call ends with UNAUTHENTICATED or PERMISSION_DENIED. The
 * authorization header is removed before the call goes on.
 */
export function authInterceptor(options: AuthInterceptorOptions): grpc.ServerInterceptor {
  return (method, call) =>
    new grpc.ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(metadata, proceed) {
            const header = metadata.get('authorization')[0];
            const decision = decide(
              method.path,
              {
                authContext: call.getAuthContext(),
                authorization: typeof header === 'string' ? header : header?.toString('utf8'),
              },
              options.operatorToken(),
            );
            if (!decision.allowed) {
              options.logger.warn('call refused', {
                op: method.path,
                peer: call.getPeer(),
                code: grpc.status[decision.code],
                error: decision.details,
              });
              call.sendStatus({ code: decision.code, details: decision.details });
              return;
            }
            metadata.remove('authorization');
            proceed(metadata);
          },
        });
      },
    });
}
