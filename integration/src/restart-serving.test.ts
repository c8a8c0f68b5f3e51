// The agent serves at once after a restart (issue 17, deliverable 3): the restore runs in the
// background. Ten allocations on a network whose last plugin takes 3 s to answer CHECK make the
// restore last several seconds; meanwhile the restarted agent lists them as PHASE_RESTORING, sets
// up a new allocation without waiting, and a teardown of one being restored waits for that one.
// Needs root, iproute2, iptables and containernetworking-plugins; never touches the root namespace.
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { unary } from '@allocnet/proto';
import { outcome, PLUGIN_DIR, useAgentHost } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';

let host: AgentHost;

useAgentHost((made) => {
  host = made;
});

/** A plugin that passes its prevResult on, and answers CHECK after 3 s. */
const SLOW_CHECK = `#!${process.execPath}
const chunks = [];
process.stdin.on('data', (c) => chunks.push(c));
process.stdin.on('end', () => {
  const conf = JSON.parse(Buffer.concat(chunks).toString());
  switch (process.env.CNI_COMMAND) {
    case 'VERSION':
      process.stdout.write(JSON.stringify({ cniVersion: '1.0.0', supportedVersions: ['1.0.0'] }));
      break;
    case 'ADD':
      process.stdout.write(JSON.stringify(conf.prevResult));
      break;
    case 'CHECK':
      setTimeout(() => undefined, 3000);
      break;
  }
});
`;

const id = (n: number) => `00000000-0000-4000-8000-0000000a${n.toString(16).padStart(4, '0')}`;

function spec(allocId: string, network?: string) {
  return {
    allocId,
    namespace: 'default',
    jobId: 'web',
    groupName: 'g',
    ...(network === undefined ? {} : { network }),
  };
}

it('serves at once after a restart while ten allocations are restored in the background', async () => {
  const plugins = join(host.dir, 'slow-plugins');
  await mkdir(plugins, { recursive: true });
  await writeFile(join(plugins, 'slowcheck'), SLOW_CHECK);
  await chmod(join(plugins, 'slowcheck'), 0o755);
  await writeFile(
    join(host.confDir, '10-slow.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'slow',
      plugins: [
        {
          type: 'bridge',
          bridge: 'slow0',
          isGateway: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: '10.81.0.0/24' }]],
            dataDir: join(host.dir, 'ipam-slow'),
          },
        },
        { type: 'slowcheck' },
      ],
    }),
  );
  const args = ['--plugin-dir', PLUGIN_DIR, '--plugin-dir', plugins];
  let agent = await host.start({ args });
  const ids = Array.from({ length: 10 }, (_, i) => id(i));
  for (const allocId of ids) {
    expect(await outcome(unary(host.alloc(), 'SetupAllocNetwork', spec(allocId, 'slow')))).toBe(
      'ok',
    );
  }
  expect(await agent.stop()).toEqual({ code: 0, signal: null });

  // Each restore CHECKs its allocation: 3 s each, 8 at a time, so at least 6 s in all.
  agent = await host.start({ args, serving: true });
  const ready = agent.lines().find((l) => l.message === 'agent ready');
  expect(ready?.restoring).toBe(10);
  const restored = () =>
    agent.lines().some((l) => l.message === 'restored allocations from the last run');

  const listed = await unary(host.alloc(), 'ListAllocNetworks', {});
  expect(listed.allocations.filter((a) => a.phase === 'PHASE_RESTORING').length).toBeGreaterThan(0);
  expect((await unary(host.operator(), 'GetAgentInfo', {})).restoring).toBeGreaterThan(0);

  // A new allocation (the default network) does not wait for the restore.
  expect(await outcome(unary(host.alloc(), 'SetupAllocNetwork', spec(id(100))))).toBe('ok');
  expect(restored()).toBe(false);

  // A teardown of an allocation being restored waits for its restore, then runs.
  expect(await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId: id(9) }))).toBe('ok');

  const line = await agent.waitForLine(
    (l) => l.message === 'restored allocations from the last run',
  );
  expect(line).toMatchObject({ kept: 10 });
  const after = await unary(host.alloc(), 'ListAllocNetworks', {});
  expect(after.allocations.map((a) => [a.allocId, a.phase]).sort()).toEqual(
    [...ids.slice(0, 9), id(100)].map((allocId) => [allocId, 'PHASE_READY']).sort(),
  );
  expect((await unary(host.operator(), 'GetAgentInfo', {})).restoring).toBe(0);

  for (const allocId of [...ids.slice(0, 9), id(100)]) {
    expect(await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId }))).toBe('ok');
  }
  expect(await host.namespaces()).toEqual([]);
  expect(await agent.stop()).toEqual({ code: 0, signal: null });
});
