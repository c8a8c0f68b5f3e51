// The host-port claims on their own: the overlap rule (same or every address, v4 against v6, tcp
// against udp), check-and-take, release, and a property against a brute-force model.
import fc from 'fast-check';
import { silentLogger } from '@allocnet/base';
import type { Logger } from '@allocnet/base';
import type { RequestedPortMapping } from '@allocnet/cni-configurator';
import { propertyParameters } from '@allocnet/cni/testing';
import { isRunnerError } from './errors.js';
import type { RunnerError } from './errors.js';
import { createPortClaims } from './port-claims.js';
import type { HeldPort } from './port-claims.js';

function port(
  hostPort: number,
  protocol: 'tcp' | 'udp',
  hostIP = '',
  field: (string | number)[] = ['ports', 0, 'value'],
): RequestedPortMapping {
  return {
    hostPort,
    containerPort: hostPort,
    protocol,
    ...(hostIP === '' ? {} : { hostIP }),
    field,
    label: 'http',
  };
}

function refusal(fn: () => void): RunnerError {
  try {
    fn();
  } catch (error) {
    if (isRunnerError(error)) return error;
    throw error;
  }
  throw new Error('it did not fail');
}

describe('createPortClaims', () => {
  it('refuses a port on every address that another allocation maps, naming the field and the holder', () => {
    const claims = createPortClaims(silentLogger);
    claims.claim('A', [port(28080, 'tcp'), port(28080, 'udp')]);
    const error = refusal(() => {
      claims.claim('B', [port(9000, 'tcp'), port(28080, 'tcp', '', ['ports', 1, 'value'])]);
    });
    expect([error.code, error.kind, error.field, error.message]).toEqual([
      'host-port-taken',
      'conflict',
      'spec.ports[1].value',
      'setup of allocation "B" refused: spec.ports[1].value ("http"): host port 28080/tcp on every address is already mapped by allocation "A"',
    ]);
    expect(error.parts).toEqual([
      'setup of allocation "B" refused: ',
      { field: ['spec', 'ports', 1, 'value'] },
      ' ("http"): host port 28080/tcp on every address is already mapped by allocation "A"',
    ]);
    // Nothing was taken: 9000 is free.
    expect(claims.heldBy('B')).toEqual([]);
    expect(claims.holdersOf({ hostPort: 9000, protocol: 'tcp' })).toEqual([]);
  });

  it('overlaps on the same address or every address; not on another address, family, protocol or port', () => {
    const claims = createPortClaims(silentLogger);
    claims.claim('A', [port(80, 'tcp', '10.0.0.1'), port(81, 'tcp', 'fd00::1')]);
    const taken = (p: RequestedPortMapping) => {
      try {
        claims.claim('probe', [p]);
      } catch (error) {
        if (isRunnerError(error) && error.code === 'host-port-taken') return true;
        throw error;
      }
      claims.release('probe');
      return false;
    };
    expect([
      taken(port(80, 'tcp', '10.0.0.1')),
      taken(port(80, 'tcp')),
      taken(port(80, 'tcp', '::ffff:10.0.0.1')),
      taken(port(81, 'tcp', 'fd00:0::1')),
      taken(port(81, 'tcp')),
    ]).toEqual([true, true, true, true, true]);
    expect([
      taken(port(80, 'tcp', '10.0.0.2')),
      taken(port(80, 'tcp', 'fd00::1')),
      taken(port(81, 'tcp', '10.0.0.1')),
      taken(port(80, 'udp', '10.0.0.1')),
      taken(port(82, 'tcp')),
    ]).toEqual([false, false, false, false, false]);
  });

  it('names the holder’s address when it is not the one asked for', () => {
    const claims = createPortClaims(silentLogger);
    claims.claim('A', [port(53, 'udp', '192.0.2.1')]);
    expect(
      refusal(() => {
        claims.claim('B', [port(53, 'udp')]);
      }).message,
    ).toBe(
      'setup of allocation "B" refused: spec.ports[0].value ("http"): host port 53/udp on every address is already mapped by allocation "A" (on 192.0.2.1)',
    );
  });

  it('never refuses an allocation its own ports, and adds to what it holds', () => {
    const claims = createPortClaims(silentLogger);
    claims.claim('A', [port(80, 'tcp')]);
    claims.claim('A', [port(80, 'tcp'), port(443, 'tcp')]);
    expect(claims.heldBy('A')).toEqual([
      { hostPort: 80, protocol: 'tcp' },
      { hostPort: 443, protocol: 'tcp' },
    ]);
  });

  it('frees an allocation’s ports on release', () => {
    const claims = createPortClaims(silentLogger);
    claims.claim('A', [port(80, 'tcp')]);
    claims.release('A');
    claims.claim('B', [port(80, 'tcp')]);
    expect(claims.holdersOf({ hostPort: 80, protocol: 'tcp', hostIP: '10.0.0.9' })).toEqual(['B']);
  });

  it('logs a refusal as a warning naming both allocations', () => {
    const warnings: unknown[] = [];
    const log: Logger = {
      ...silentLogger,
      warn: (message, meta) => warnings.push([message, meta]),
    };
    const claims = createPortClaims(log);
    claims.claim('A', [port(80, 'tcp')]);
    refusal(() => {
      claims.claim('B', [port(80, 'tcp', '10.0.0.1')]);
    });
    expect(warnings).toEqual([
      [
        'setup refused: its host port is already mapped by another allocation',
        { allocId: 'B', holder: 'A', hostPort: 80, protocol: 'tcp', hostIp: '10.0.0.1' },
      ],
    ]);
  });

  it('holds what records say without a check, both holders kept when two overlap', () => {
    const claims = createPortClaims(silentLogger);
    claims.hold('A', [{ hostPort: 80, protocol: 'tcp' }]);
    claims.hold('B', [{ hostPort: 80, protocol: 'tcp' }]);
    expect(claims.holdersOf({ hostPort: 80, protocol: 'tcp' })).toEqual(['A', 'B']);
    claims.release('A');
    expect(
      refusal(() => {
        claims.claim('C', [port(80, 'tcp')]);
      }).code,
    ).toBe('host-port-taken');
  });
});

// The model: a list of (allocation, port) pairs, and overlap written out by hand over a fixed
// set of addresses whose spellings are known to be the same address.
const ADDRESSES = ['', '10.0.0.1', '::ffff:10.0.0.1', '10.0.0.2', '::1', '0:0::1', 'fd00::2'];
const SAME: Readonly<Record<string, string>> = {
  '::ffff:10.0.0.1': '10.0.0.1',
  '0:0::1': '::1',
};
const canonical = (a: string | undefined) => SAME[a ?? ''] ?? a ?? '';
function modelOverlap(a: HeldPort, b: HeldPort): boolean {
  if (a.hostPort !== b.hostPort || a.protocol !== b.protocol) return false;
  const x = canonical(a.hostIP);
  const y = canonical(b.hostIP);
  return x === '' || y === '' || x === y;
}

type Op =
  | { readonly kind: 'claim'; readonly allocId: string; readonly ports: RequestedPortMapping[] }
  | { readonly kind: 'release'; readonly allocId: string };

const portArb = fc
  .record({
    hostPort: fc.constantFrom(80, 81),
    protocol: fc.constantFrom('tcp' as const, 'udp' as const),
    hostIP: fc.constantFrom(...ADDRESSES),
  })
  .map((p) => port(p.hostPort, p.protocol, p.hostIP));
const allocArb = fc.constantFrom('A', 'B', 'C');
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('claim' as const),
    allocId: allocArb,
    ports: fc.array(portArb, { minLength: 1, maxLength: 3 }),
  }),
  fc.record({ kind: fc.constant('release' as const), allocId: allocArb }),
);

describe('createPortClaims against a brute-force model', () => {
  it('refuses exactly the claims that overlap another allocation’s, and holds what was taken', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 20 }), (ops) => {
        const claims = createPortClaims(silentLogger);
        let model: { allocId: string; port: HeldPort }[] = [];
        for (const op of ops) {
          if (op.kind === 'release') {
            claims.release(op.allocId);
            model = model.filter((e) => e.allocId !== op.allocId);
            continue;
          }
          const refused = model.some(
            (e) => e.allocId !== op.allocId && op.ports.some((p) => modelOverlap(e.port, p)),
          );
          let threw = false;
          try {
            claims.claim(op.allocId, op.ports);
          } catch (error) {
            if (!isRunnerError(error) || error.code !== 'host-port-taken') throw error;
            threw = true;
          }
          expect(threw).toBe(refused);
          if (!refused) model.push(...op.ports.map((p) => ({ allocId: op.allocId, port: p })));
        }
        for (const hostPort of [80, 81]) {
          for (const protocol of ['tcp', 'udp'] as const) {
            for (const hostIP of ADDRESSES) {
              const probe = { hostPort, protocol, hostIP };
              const expected = [
                ...new Set(model.filter((e) => modelOverlap(e.port, probe)).map((e) => e.allocId)),
              ];
              expect([...claims.holdersOf(probe)].sort()).toEqual(expected.sort());
            }
          }
        }
      }),
      propertyParameters(28, 300),
    );
  });
});
