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
});
