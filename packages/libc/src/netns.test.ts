import { readlinkSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SetnsError, inNetworkNamespace } from './netns.js';

// Entering another namespace is tested on a real one in integration (native-add.test.ts); here,
// the process's own, and paths that are not namespaces: nothing here changes any namespace.
const here = () => readlinkSync('/proc/thread-self/ns/net');

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'allocnet-libc-netns-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('inNetworkNamespace', () => {
  it('runs the function in the namespace and answers what it returns', () => {
    const home = here();
    expect(inNetworkNamespace('/proc/self/ns/net', () => [here(), 42])).toEqual([home, 42]);
    expect(here()).toBe(home);
  });

  it('comes back when the function throws, and passes its error on', () => {
    const home = here();
    expect(() =>
      inNetworkNamespace('/proc/self/ns/net', () => {
        throw new Error('inside');
      }),
    ).toThrow('inside');
    expect(here()).toBe(home);
  });

  it('refuses a file that is not a namespace with setns’s errno, running nothing', async () => {
    const path = join(dir, 'not-a-namespace');
    await writeFile(path, '');
    let ran = false;
    let thrown: unknown;
    try {
      inNetworkNamespace(path, () => {
        ran = true;
      });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(SetnsError);
    expect(thrown).toMatchObject({ path, errno: 22, message: `setns ${path} failed (errno 22)` });
    expect(ran).toBe(false);
  });

  it('passes on the open’s error for a path that is not there', () => {
    let thrown: unknown;
    try {
      inNetworkNamespace(join(dir, 'gone'), () => 1);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ code: 'ENOENT' });
  });
});
