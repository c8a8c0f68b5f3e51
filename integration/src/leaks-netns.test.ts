// `allocnet leaks` and `leaks --reap` with stray namespaces: the real agent process in a throwaway
// node namespace (`nsenter --net=`), the Debian plugins, the CLI as a separate process over the
// agent's unix socket. A namespace named `<agent's netns prefix><id>` that no allocation has is
// listed and removed; an allocation's own namespace, and one given to an allocation by path that
// carries the prefix, are neither. Every namespace carries the host's prefix, which starts with
// this run's; the host's dispose removes whatever is left. Needs root, iproute2, iptables and
// containernetworking-plugins; never touches the root network namespace.
import { execa } from 'execa';
import { unary } from '@allocnet/proto';
import { CLI_MAIN, useAgentHost } from './fixtures/agent-host.js';
import type { AgentHost } from './fixtures/agent-host.js';

const LIVE = '00000000-0000-4000-8000-00000000001a';
const STRAY = '00000000-0000-4000-8000-00000000001b';
const CLEAN =
  '0 leaked allocation(s); orphans: 0 rule(s), 0 chain(s), 0 reservation(s), 0 cache file(s)';

let host: AgentHost;

useAgentHost((made) => {
  host = made;
});

function cli(...args: string[]) {
  return execa(process.execPath, [CLI_MAIN, ...args, '--address', host.socket], {
    reject: false,
  });
}

it('lists a stray namespace with why, reaps it, and never touches an allocation’s', async () => {
  await host.start();
  const alloc = host.alloc();
  const prefix = host.netnsPrefix;
  const live = `${prefix}${LIVE}`;
  const given = `${prefix}given-1`;
  const stray = { name: `${prefix}${STRAY}`, path: `/run/netns/${prefix}${STRAY}` };
  const why = `named like this agent's allocations (prefix ${JSON.stringify(prefix)}) but no allocation has it`;

  const job = { namespace: 'default', jobId: 'web', groupName: 'api' };
  await unary(alloc, 'SetupAllocNetwork', { ...job, allocId: LIVE }, { deadlineMs: 60_000 });
  // A namespace named like the agent's, made by someone else and given to an allocation by path.
  await execa('ip', ['netns', 'add', given]);
  await unary(
    alloc,
    'SetupAllocNetwork',
    { ...job, allocId: 'given-owner', netnsPath: `/run/netns/${given}` },
    { deadlineMs: 60_000 },
  );
  // The stray: named like an allocation's, and no allocation has it.
  await execa('ip', ['netns', 'add', stray.name]);
  expect(await host.namespaces()).toEqual([live, stray.name, given].sort());

  const listed = await cli('leaks');
  expect(listed.stderr).toBe('');
  expect(listed.exitCode).toBe(0);
  expect(listed.stdout).toBe(
    [
      CLEAN,
      `NAMESPACE${' '.repeat(stray.name.length - 9)}  PATH${' '.repeat(stray.path.length - 4)}  WHY`,
      `${stray.name}  ${stray.path}  ${why}`,
      '1 stray namespace(s)',
    ].join('\n'),
  );
  const json = await cli('leaks', '--json');
  expect(JSON.parse(json.stdout)).toMatchObject({
    leaks: [],
    namespaces: [{ ...stray, allocId: STRAY, reason: why }],
  });
  expect(await host.namespaces()).toEqual([live, stray.name, given].sort());

  const reaped = await cli('leaks', '--reap');
  expect(reaped.stderr).toBe('');
  expect(reaped.exitCode).toBe(0);
  expect(reaped.stdout).toBe(
    [
      'reaped 0 leaked allocation(s); 0 failed; orphans: 0 rule(s), 0 chain(s), 0 reservation(s), 0 cache file(s)',
      'removed 1 stray namespace(s)',
      `  netns ${stray.name} (${stray.path})`,
    ].join('\n'),
  );
  expect(await host.namespaces()).toEqual([live, given].sort());
  for (const allocId of [LIVE, 'given-owner']) {
    expect(await unary(alloc, 'CheckAllocNetwork', { allocId })).toMatchObject({
      healthy: true,
      problem: '',
    });
  }
  expect((await cli('leaks')).stdout).toBe(CLEAN);

  for (const allocId of [LIVE, 'given-owner']) {
    await unary(alloc, 'TeardownAllocNetwork', { allocId }, { deadlineMs: 60_000 });
  }
  // The agent removes the namespace it made, never the one it was given.
  expect(await host.namespaces()).toEqual([given]);
});
