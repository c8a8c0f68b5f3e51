import { execFileSync } from 'node:child_process';
import { bindLibc, loadKoffiLibc } from './bind.js';

describe('bindLibc', () => {
  it('binds glibc functions on first use, once, and reads errno after a failed call', () => {
    const libc = bindLibc<{ getpid: () => number; close: (fd: number) => number }>({
      getpid: 'int getpid(void)',
      close: 'int close(int fd)',
    });
    expect(libc().getpid()).toBe(process.pid);
    expect(libc()).toBe(libc());
    expect(libc().close(-1)).toBe(-1);
    expect(libc().errno()).toBe(9); // EBADF
  });

  it('loads koffi and libc once for every binding', () => {
    expect(loadKoffiLibc()).toBe(loadKoffiLibc());
  });

  it('loads koffi’s native module without the Node modules koffi’s entry loads for downloads', () => {
    // A fresh process over the built package (tools/setup.sh builds the workspace before tests).
    const dist = new URL('../dist/index.js', import.meta.url).href;
    const script = `import(${JSON.stringify(dist)}).then((m) => {
      const { koffi } = m.loadKoffiLibc();
      const loaded = (name) => process.moduleLoadList.includes('NativeModule ' + name);
      console.log(JSON.stringify({ https: loaded('https'), zlib: loaded('zlib'), load: typeof koffi.load, errno: typeof koffi.errno }));
    });`;
    const out = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({
      https: false,
      zlib: false,
      load: 'function',
      errno: 'function',
    });
  });
});
