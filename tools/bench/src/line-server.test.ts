import { startLineServer } from './line-server.js';

// A server that holds requests until it has two, then answers the second first; `die` makes it
// write on stderr and exit 3 without answering.
const SERVER = `
const rl = require('node:readline').createInterface({ input: process.stdin });
const held = [];
rl.on('line', (line) => {
  const r = JSON.parse(line);
  if (r.op === 'die') { process.stderr.write('dying on purpose'); process.exit(3); }
  held.push(r);
  if (held.length === 2) for (const h of held.splice(0).reverse())
    process.stdout.write(JSON.stringify({ seq: h.seq, ok: true, echo: h.op }) + '\\n');
});
`;

describe('startLineServer', () => {
  it('matches answers to requests by seq, whatever order they come in', async () => {
    const server = startLineServer('test server', [process.execPath, '-e', SERVER]);
    const [a, b] = await Promise.all([server.request({ op: 'a' }), server.request({ op: 'b' })]);
    expect(a).toEqual({ seq: 1, ok: true, echo: 'a' });
    expect(b).toEqual({ seq: 2, ok: true, echo: 'b' });
    expect(await server.stop()).toBe('');
  });

  it('fails the waiting and every later request with driver-ended when the process exits', async () => {
    const server = startLineServer('test server', [process.execPath, '-e', SERVER]);
    const waiting = server.request({ op: 'a' });
    const dying = server.request({ op: 'die' });
    const message = 'test server exited 3 with calls unanswered: dying on purpose';
    await expect(waiting).rejects.toMatchObject({ code: 'driver-ended', message });
    await expect(dying).rejects.toMatchObject({ code: 'driver-ended', message });
    await expect(server.request({ op: 'b' })).rejects.toMatchObject({ message });
    expect(await server.stop()).toBe('dying on purpose');
  });

  it('fails with driver-ended when the program cannot start', async () => {
    const server = startLineServer('test server', ['/nonexistent/program']);
    await expect(server.request({ op: 'a' })).rejects.toMatchObject({
      code: 'driver-ended',
      message:
        'test server could not start (spawn /nonexistent/program ENOENT) with calls unanswered: ',
    });
    await server.stop();
  });
});
