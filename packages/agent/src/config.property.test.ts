// Properties of the agent's configuration decoding (the config file, JSON or YAML, the ALLOCNET_*
// environment and the flags): any input is a configuration or an `invalid-config` AgentError
// naming a key the input has (or the missing key of a section it has) and where its value came
// from; a resolved configuration, written back as a file, reads back as itself.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { stringify as toYaml } from 'yaml';
import { formatPath } from '@allocnet/base';
import { mutateAt, pathsOf, propertyParameters, tempDir, valueAt } from '@allocnet/cni/testing';
import { checkAgentConfig, loadAgentConfig } from './config.js';
import type { AgentConfig } from './config.js';
import { isAgentError } from './errors.js';
import { ENV_SETTINGS } from './settings.js';

const SEED = 16_2011;

const segment = fc.stringMatching(/^[a-z][a-z0-9_-]{0,7}$/);
const dir = fc.array(segment, { minLength: 1, maxLength: 3 }).map((parts) => `/${parts.join('/')}`);
const port = fc.integer({ min: 0, max: 65535 });

/** A configuration file's value: every key set or left out. */
const validConfig = fc.record(
  {
    dataDir: dir,
    socket: dir.map((d) => `${d}/agent.sock`),
    tcp: fc.record({ address: port.map((p) => `127.0.0.1:${p}`) }),
    cni: fc.record(
      {
        pluginDirs: fc.array(dir, { minLength: 1, maxLength: 3 }),
        confDir: dir,
        cacheDir: dir,
        timeoutMs: fc.integer({ min: 1, max: 600_000 }),
        queueDir: dir,
      },
      { requiredKeys: [] },
    ),
    defaultNetwork: fc.record(
      {
        name: fc.stringMatching(/^[a-z][a-z0-9]{0,9}$/),
        bridge: fc.stringMatching(/^[a-z][a-z0-9]{0,9}$/),
        subnet: fc.integer({ min: 0, max: 255 }).map((n) => `10.${n}.0.0/16`),
        hairpinMode: fc.boolean(),
        mtu: fc.integer({ min: 576, max: 9000 }),
        ipamDataDir: dir,
      },
      { requiredKeys: [] },
    ),
    netnsPrefix: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/),
    ignoreHostIps: fc.boolean(),
    ipv6OnIpv4Interfaces: fc.boolean(),
    region: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/),
    concurrency: fc.integer({ min: 1, max: 1024 }),
    reconcile: fc.record(
      {
        mode: fc.constantFrom('reap', 'report'),
        intervalMs: fc.integer({ min: 0, max: 3_600_000 }),
      },
      { requiredKeys: [] },
    ),
    log: fc.record(
      {
        level: fc.constantFrom('error', 'warn', 'info', 'debug'),
        format: fc.constantFrom('json', 'text'),
      },
      { requiredKeys: [] },
    ),
    metrics: fc.record({
      address: fc.oneof(
        fc.constant('off'),
        port.map((p) => `127.0.0.1:${p}`),
      ),
    }),
    shutdownTimeoutMs: fc.integer({ min: 0, max: 60_000 }),
    readyFile: dir,
  },
  { requiredKeys: [] },
);

const change = fc.oneof(
  fc.constant('delete' as const),
  fc.jsonValue({ maxDepth: 2 }).map((replace) => ({ replace })),
  fc
    .constantFrom(
      '',
      'relative/dir',
      '/a/../b',
      '10.0.0.1:80',
      '[::1]:99999',
      0,
      -1,
      1.5,
      'x'.repeat(200),
    )
    .map((replace) => ({ replace })),
);
const mutatedConfig = fc.oneof(
  fc.tuple(validConfig, fc.nat(), change).map(([c, pick, ch]) => mutateAt(c, pick, ch)),
  // A misspelt key, anywhere a section has keys.
  fc.tuple(validConfig, fc.string({ maxLength: 8 })).map(([c, key]) => ({ ...c, [key]: 1 })),
);

/**
 * Whether `field` (`cni.pluginDirs[2]`, spelt by formatPath) names a key `value` has, or a key of a
 * section it has (a missing one). Matched against the paths of `value`, as a key may hold a dot.
 */
function namesKeyOf(value: unknown, field: string): boolean {
  const paths = [[], ...pathsOf(value)];
  if (paths.some((p) => p.length > 0 && formatPath(p) === field)) return true;
  return paths.some((p) => {
    const section = valueAt(value, p).value;
    const prefix = p.length === 0 ? '' : `${formatPath(p)}.`;
    return (
      typeof section === 'object' &&
      section !== null &&
      !Array.isArray(section) &&
      field.startsWith(prefix) &&
      field.length > prefix.length
    );
  });
}

/** Checks a refusal: `invalid-config`, a key of `value` (or its section's missing key), a source. */
function checkRefusal(error: unknown, value: unknown, source: string): void {
  if (!isAgentError(error)) throw error;
  expect(error.code).toBe('invalid-config');
  const field = error.field ?? '';
  expect(field).not.toBe('');
  expect(error.message.startsWith(`config: ${field} `)).toBe(true);
  expect(error.source).toBe(source);
  if (field === '(top level)') {
    // Not an object, or (a nit of the message) an object with a key named "".
    const isObject = typeof value === 'object' && value !== null && !Array.isArray(value);
    expect(!isObject || valueAt(value, ['']).found).toBe(true);
    return;
  }
  // A key the resolved configuration needs with another (tcp.address with tcp.tls) is in a
  // section the input has; cni.socket may be made from socket.
  expect(namesKeyOf(value, field) || field === 'cni.socket').toBe(true);
}

describe('agent config properties', () => {
  it('reads any value as a configuration or an invalid-config error naming a key of it', () => {
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), mutatedConfig), (value) => {
        try {
          checkAgentConfig(value, 'the test');
        } catch (error) {
          checkRefusal(error, value, 'the test');
        }
      }),
      propertyParameters(SEED, 500),
    );
  });

  it('reads any ALLOCNET_* value as a configuration or an error naming the variable', async () => {
    const text = fc.oneof(
      fc.string({ maxLength: 20 }),
      fc.constantFrom(
        '0',
        '-1',
        '1.5',
        'true',
        'no',
        '/a/b',
        '/a/../b',
        '127.0.0.1:1',
        'reap',
        'x:y',
      ),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ENV_SETTINGS), text, async (setting, value) => {
        try {
          await loadAgentConfig({ env: { [setting.env]: value } });
        } catch (error) {
          if (!isAgentError(error)) throw error;
          expect(error.code).toBe('invalid-config');
          // The variable is named, or (for a key checked against another) the key it set.
          expect(error.source === `env ${setting.env}` || error.field === setting.key).toBe(true);
        }
      }),
      propertyParameters(SEED, 300),
    );
  }, 60_000);

  describe('in a file', () => {
    let tmp: Awaited<ReturnType<typeof tempDir>>;
    beforeAll(async () => {
      tmp = await tempDir('allocnet-config-property-');
    });
    afterAll(async () => {
      await tmp.remove();
    });

    it('reads any YAML or JSON file as a configuration or an invalid-config error', async () => {
      const yamlPiece = fc.constantFrom(
        'dataDir: /x', 'socket: &s /run/a.sock', 'cni:', '  pluginDirs: [/a, *s]', 'tcp: &t {address: "127.0.0.1:1"}',
        'defaultNetwork: *t', 'log: {level: info}', '- a', '? x', ': y', '!!binary aGk=', '"', "'", '{', ']', '#',
        'limits: {maxPorts: 2}', 'concurrency: 0x10', 'region: .nan', '\t', '  ', '&a [*a]',
      ); // prettier-ignore
      const contents = fc.oneof(
        fc.tuple(
          fc.constant('agent.yaml'),
          fc.array(yamlPiece, { maxLength: 8 }).map((l) => l.join('\n')),
        ),
        fc.tuple(
          fc.constant('agent.yaml'),
          mutatedConfig.map((v) => toYaml(v)),
        ),
        fc.tuple(
          fc.constant('agent.json'),
          mutatedConfig.map((v) => JSON.stringify(v)),
        ),
        fc.tuple(
          fc.constantFrom('agent.yaml', 'agent.json'),
          fc.string({ unit: 'binary', maxLength: 60 }),
        ),
      );
      await fc.assert(
        fc.asyncProperty(contents, async ([name, text]) => {
          const file = join(tmp.path, name);
          await writeFile(file, text);
          try {
            await loadAgentConfig({ file, env: {} });
          } catch (error) {
            if (!isAgentError(error)) throw error;
            expect(error.code).toBe('invalid-config');
            expect(error.source).toBe(`file ${file}`);
          }
        }),
        propertyParameters(SEED, 200),
      );
    }, 60_000);

    it('reads a resolved configuration, written back as a file, as itself', async () => {
      await fc.assert(
        fc.asyncProperty(validConfig, fc.boolean(), async (value, json) => {
          let resolved: AgentConfig;
          try {
            resolved = checkAgentConfig(value);
          } catch (error) {
            // A valid key may still be refused with another (a socket path too long for cni.socket).
            checkRefusal(error, value, 'the given config');
            return;
          }
          const file = join(tmp.path, json ? 'resolved.json' : 'resolved.yaml');
          await writeFile(file, json ? JSON.stringify(resolved) : toYaml(resolved));
          expect(await loadAgentConfig({ file, env: {} })).toEqual(resolved);
          expect(checkAgentConfig(resolved)).toEqual(resolved);
        }),
        propertyParameters(SEED, 100),
      );
    }, 60_000);
  });
});

describe('agent config examples the properties found', () => {
  let tmp: Awaited<ReturnType<typeof tempDir>>;
  beforeAll(async () => {
    tmp = await tempDir('allocnet-config-example-');
  });
  afterAll(async () => {
    await tmp.remove();
  });

  it.each([
    ['a YAML alias that contains itself', 'agent.yaml', 'dataDir: &x [*x]\n', 'dataDir'],
    ['a key named as a method of every object', 'agent.yaml', 'toString: 1\n', 'toString'],
    ['the key "__proto__"', 'agent.json', '{"cni": {"__proto__": {}}}', 'cni.__proto__'],
    [
      'a JSON list nested 10,000 deep',
      'agent.json',
      `{"socket": ${'['.repeat(10_000)}${']'.repeat(10_000)}}`,
      'socket',
    ],
  ])('refuses %s with invalid-config naming the key', async (_, name, text, field) => {
    const file = join(tmp.path, name);
    await writeFile(file, text);
    let refusal: unknown;
    try {
      await loadAgentConfig({ file, env: {} });
    } catch (error) {
      refusal = error;
    }
    expect(isAgentError(refusal)).toBe(true);
    expect(refusal).toMatchObject({ code: 'invalid-config', field, source: `file ${file}` });
  });
});
