// Properties of the result cache's reader (files libcni-based tools write too): any file content is
// an entry or a `cache` CniError, never anything else; an entry written is read back the same.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { createCniCache } from './cache.js';
import type { CacheEntry } from './cache.js';
import { isCniError } from './errors.js';
import { mutateAt, propertyParameters } from './testing/properties.js';
import { tempDir } from './testing/tmp.js';

const SEED = 16_2005;

const name = fc.stringMatching(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,15}$/);
const entry: fc.Arbitrary<CacheEntry> = fc.record({
  networkName: name,
  containerId: name,
  ifName: fc.stringMatching(/^[a-z][a-z0-9]{0,14}$/),
  netns: fc.option(fc.constantFrom('/run/netns/a', '/proc/1/ns/net'), { nil: undefined }),
  cniArgs: fc.array(fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })), {
    maxLength: 3,
  }),
  capabilityArgs: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), {
    maxKeys: 2,
  }),
  // The conflist as JSON text (JSON.stringify writes no lone surrogate).
  config: fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
  result: fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined }),
});

/** As JSON text gives it back: a -0 is read as 0. */
const asJson = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

describe('the result cache properties', () => {
  let dir: Awaited<ReturnType<typeof tempDir>>;
  beforeAll(async () => {
    dir = await tempDir('allocnet-cache-property-');
  });
  afterAll(async () => {
    await dir.remove();
  });

  it('reads any file as an entry or a cache CniError', async () => {
    const cache = createCniCache(dir.path);
    await mkdir(join(dir.path, 'results'), { recursive: true });
    const file = join(dir.path, 'results', 'n-c-eth0');
    const valid = JSON.stringify({
      kind: 'cniCacheV1',
      containerId: 'c',
      ifName: 'eth0',
      networkName: 'n',
      config: 'e30=',
    });
    const text = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 100 }),
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc
        .tuple(
          fc.nat(),
          fc.oneof(
            fc.constant('delete' as const),
            fc.jsonValue().map((replace) => ({ replace })),
          ),
        )
        .map(([pick, change]) => JSON.stringify(mutateAt(JSON.parse(valid), pick, change))),
    );
    await fc.assert(
      fc.asyncProperty(text, async (content) => {
        await writeFile(file, content);
        try {
          await cache.readResult('n', 'c', 'eth0');
        } catch (error) {
          if (!isCniError(error)) throw error;
          expect(error.code).toBe('cache');
          expect(error.message.startsWith(`cache file ${JSON.stringify(file)}`)).toBe(true);
        }
      }),
      propertyParameters(SEED, 100),
    );
  }, 60_000);

  it('reads back every entry it writes', async () => {
    const cache = createCniCache(dir.path);
    await fc.assert(
      fc.asyncProperty(entry, async (written) => {
        await cache.writeResult(written);
        const read = await cache.readResult(
          written.networkName,
          written.containerId,
          written.ifName,
        );
        expect(read).toEqual(asJson({ ...written, netns: written.netns }));
        await cache.removeResult(written.networkName, written.containerId, written.ifName);
      }),
      propertyParameters(SEED, 50),
    );
  }, 60_000);
});
