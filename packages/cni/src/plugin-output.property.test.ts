// Properties of what a plugin prints, read at the edge: a successful ADD's stdout is a result or
// an `invalid-result` CniError, a failure's output is always a CniError; either way the message
// is one printable line (a plugin's control bytes never reach a status message or a terminal).
import fc from 'fast-check';
import { isCniError } from './errors.js';
import type { CniError } from './errors.js';
import { parsedResult, pluginFailure } from './plugin-output.js';
import { encodeResult } from './result.js';
import { mutateAt, propertyParameters } from './testing/properties.js';

const SEED = 16_2002;

/** Any character a plugin could print: control characters, quotes, lone surrogates included. */
const anyText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 200 }),
  fc.string({
    unit: fc.constantFrom('\u001b', '\u0000', '\u009b', '\n', '\r', '"', '{', '}', 'a', ' '),
  }),
);
const anyJson = fc.jsonValue().map((v) => JSON.stringify(v));
/** Results with one field replaced by text a plugin could print. */
const mutatedResultText = fc.tuple(fc.nat(), anyText).map(([pick, text]) =>
  JSON.stringify(
    mutateAt(
      encodeResult(
        {
          cniVersion: '1.0.0',
          interfaces: [{ name: 'eth0', sandbox: '/run/netns/c1' }],
          ips: [{ address: '10.0.0.2/24', gateway: '10.0.0.1', interface: 0 }],
          routes: [{ dst: '0.0.0.0/0' }],
          dns: { nameservers: ['10.0.0.1'] },
        },
        '1.0.0',
      ),
      pick,
      { replace: text },
    ),
  ),
);
/** The spec's error JSON with any code, msg and details. */
const errorJson = fc
  .record(
    { code: fc.oneof(fc.integer(), fc.double()), msg: anyText, details: anyText },
    { requiredKeys: ['code', 'msg'] },
  )
  .map((e) => JSON.stringify(e));

// C0 and C1 controls but tab (a tab is printable in a message).
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f]/;

function checkMessage(error: CniError, context: string): void {
  expect(error.message.startsWith(`${context}: `)).toBe(true);
  expect(error.message).not.toMatch(CONTROL);
}

describe('parsedResult properties', () => {
  it('reads any stdout as a result or an invalid-result CniError of one printable line', () => {
    fc.assert(
      fc.property(fc.oneof(anyText, anyJson, mutatedResultText), (stdout) => {
        try {
          parsedResult('bridge', 'ADD', 'c1', stdout, '1.0.0');
        } catch (error) {
          if (!isCniError(error)) throw error;
          expect(error.code).toBe('invalid-result');
          checkMessage(error, 'plugin "bridge" failed (ADD) for "c1"');
        }
      }),
      propertyParameters(SEED, 500),
    );
  });
});

describe('pluginFailure properties', () => {
  it('makes any failed output a CniError of one printable line of bounded length', () => {
    fc.assert(
      fc.property(
        fc.oneof(anyText, anyJson, errorJson),
        fc.oneof(anyText, errorJson),
        fc.integer({ min: 1, max: 255 }),
        (stdout, stderr, exitCode) => {
          const error = pluginFailure('bridge', 'DEL', 'c1', {
            kind: 'exited',
            exitCode,
            stdout,
            stderr,
          });
          const context = 'plugin "bridge" failed (DEL) for "c1"';
          checkMessage(error, context);
          // 500 characters of the plugin's text, and the exit status.
          expect(error.message.length).toBeLessThanOrEqual(
            context.length + 2 + 500 + ' (exit status 255)'.length,
          );
        },
      ),
      propertyParameters(SEED, 500),
    );
  });
});

describe('parsedResult examples the properties found', () => {
  it.each([
    ["JSON.parse's snippet of stdout", '\u009b2J', 'result cannot be read: Unexpected token'],
    [
      'a quoted field value',
      '{"cniVersion":"1.0.0","ips":[{"address":"\u009b2J"}]}',
      'result cannot be read: ips[0].address "\\x9b2J" is not a CIDR',
    ],
  ])('writes the control characters in %s as \\xNN', (_, stdout, start) => {
    let error: unknown;
    try {
      parsedResult('bridge', 'ADD', 'c1', stdout, '1.0.0');
    } catch (caught) {
      error = caught;
    }
    expect(isCniError(error)).toBe(true);
    expect((error as CniError).msg.startsWith(start)).toBe(true);
    expect((error as CniError).message).not.toMatch(CONTROL);
  });

  it('reads a list nested 10,000 deep as an invalid result, saying what it is', () => {
    let error: unknown;
    try {
      parsedResult('bridge', 'ADD', 'c1', `${'['.repeat(10_000)}${']'.repeat(10_000)}`, '1.0.0');
    } catch (caught) {
      error = caught;
    }
    expect(error).toMatchObject({
      code: 'invalid-result',
      msg: 'result cannot be read: is not a JSON object, got <a list too deep or cyclic to write>',
    });
  });
});
