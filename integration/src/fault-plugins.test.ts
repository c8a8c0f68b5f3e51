// Plugins that misbehave, under the real agent (issue 16): a plugin that starts a child which
// inherits its stdout and then hangs. Before plugins ran in their own process group, the timeout
// killed the plugin but not its child, the runtime waited for stdout to close, and the setup, the
// allocation's queue and the agent's SIGTERM all hung. Needs root, iproute2, iptables and
// containernetworking-plugins; never touches the root namespace.
import { chmod, mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { unary } from '@allocnet/proto';
import { outcome, PLUGIN_DIR, useAgentHost } from './fixtures/agent-host.js';
import { alive } from './fixtures/proc.js';
import type { AgentHost } from './fixtures/agent-host.js';

let host: AgentHost;

useAgentHost((made) => {
  host = made;
});

it('a plugin whose child holds its stdout and hangs: the setup fails in time, nothing is left, the agent stops', async () => {
  const plugins = join(host.dir, 'fault-plugins');
  await mkdir(plugins, { recursive: true });
  const pids = join(host.dir, 'children');
  // ADD: start a child that inherits stdout, write its pid down, then wait for it (hang).
  const holder = join(plugins, 'stdout-holder');
  await writeFile(
    holder,
    [
      '#!/bin/sh',
      'case "$CNI_COMMAND" in',
      `VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;`,
      `ADD) sleep 300 & echo $! >> ${pids}; wait ;;`,
      '*) exit 0 ;;',
      'esac',
      '',
    ].join('\n'),
  );
  await chmod(holder, 0o755);
  await writeFile(
    join(host.confDir, '10-faulty.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'faulty',
      plugins: [
        {
          type: 'bridge',
          bridge: 'faulty0',
          isGateway: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: '10.79.0.0/24' }]],
            dataDir: join(host.dir, 'ipam-faulty'),
          },
        },
        { type: 'stdout-holder' },
      ],
    }),
  );
  const agent = await host.start({
    args: ['--plugin-dir', PLUGIN_DIR, '--plugin-dir', plugins],
    env: { ALLOCNET_CNI_TIMEOUT_MS: '1000' },
  });
  const before = { rules: await host.ruleset(), reservations: await host.reservations() };

  const began = Date.now();
  const result = await outcome(
    unary(
      host.alloc(),
      'SetupAllocNetwork',
      {
        allocId: '00000000-0000-4000-8000-00000000fa01',
        namespace: 'default',
        jobId: 'web',
        groupName: 'g',
        network: 'faulty',
      },
      { deadlineMs: 60_000 },
    ),
  );
  // Three attempts of at most 1 s each, 1–2 s apart: an error, well within the deadline.
  // UNAVAILABLE (try again later), not INTERNAL: the agent is fine, the plugin did not answer.
  expect(result === 'ok' ? 'ok' : result[0]).toBe('UNAVAILABLE');
  expect(Date.now() - began).toBeLessThan(30_000);
  expect(result === 'ok' ? '' : result[1]).toContain('timed out after 1000 ms');

  // Nothing half-set-up: no record, no namespace, rules and reservations as before.
  expect(await unary(host.alloc(), 'ListAllocNetworks', {})).toEqual({ allocations: [] });
  expect(await host.namespaces()).toEqual([]);
  expect(await host.ruleset()).toBe(before.rules);
  // The children the plugin started died with it (its process group).
  const children = (await readFile(pids, 'utf8')).trim().split('\n').map(Number);
  expect(children.length).toBeGreaterThanOrEqual(1);
  for (const pid of children) expect(await alive(pid)).toBe(false);

  // The allocation's queue is free: a teardown answers at once.
  expect(
    await outcome(
      unary(host.alloc(), 'TeardownAllocNetwork', {
        allocId: '00000000-0000-4000-8000-00000000fa01',
      }),
    ),
  ).toBe('ok');
  const stopping = Date.now();
  expect(await agent.stop()).toEqual({ code: 0, signal: null });
  expect(Date.now() - stopping).toBeLessThan(10_000);
});

/**
 * One fault plugin for every way a plugin misbehaves, chosen by its config's `mode`: `crash`
 * (killed by SIGSEGV), `hang` (never answers), `garbage` (exit 1, raw bytes with terminal
 * escapes on stdout), `invalid-result` (exit 0 with a result that is not one), `slow` (answers
 * after 1.5 s: a success). DEL always succeeds, as a plugin that has nothing to undo.
 */
const FAULT_PLUGIN = `#!${process.execPath}
const chunks = [];
process.stdin.on('data', (c) => chunks.push(c));
process.stdin.on('end', () => {
  const conf = JSON.parse(Buffer.concat(chunks).toString());
  const cmd = process.env.CNI_COMMAND;
  if (cmd === 'VERSION') {
    process.stdout.write(JSON.stringify({ cniVersion: '1.0.0', supportedVersions: ['0.4.0', '1.0.0'] }));
    return;
  }
  if (cmd !== 'ADD') {
    if (conf.prevResult !== undefined) process.stdout.write(JSON.stringify(conf.prevResult));
    return;
  }
  switch (conf.mode) {
    case 'crash':
      process.kill(process.pid, 'SIGSEGV');
      break;
    case 'hang':
      setInterval(() => undefined, 1000);
      break;
    case 'garbage':
      process.stdout.write(Buffer.from([0x1b, 0x5b, 0x32, 0x4a, 0x00, 0x9b, 0x41, 0x07, 0xff, 0x0a, 0x7a]));
      process.exitCode = 1;
      break;
    case 'invalid-result':
      process.stdout.write(JSON.stringify({ cniVersion: '1.0.0', ips: 'none' }));
      break;
    case 'slow':
      setTimeout(() => process.stdout.write(JSON.stringify(conf.prevResult)), 1500);
      break;
  }
});
`;

const MODES = ['crash', 'hang', 'garbage', 'invalid-result', 'slow'] as const;

describe('a fault plugin after bridge in the chain', () => {
  it.each([
    ['crash', 'INTERNAL', ': killed by SIGSEGV'],
    ['hang', 'UNAVAILABLE', 'timed out after 2500 ms'],
    // The plugin's bytes made printable: escapes as \xNN, invalid UTF-8 as U+FFFD, one line.
    ['garbage', 'INTERNAL', ': \\x1b[2J\\x00\uFFFDA\\x07\uFFFD z (exit status 1)'],
    ['invalid-result', 'INTERNAL', 'ips'],
    ['slow', 'ok', ''],
  ] as const)(
    '%s: the setup answers %s in time, nothing is left, the agent serves on',
    async (mode, status, says) => {
      const plugins = join(host.dir, 'fault-plugins');
      await mkdir(plugins, { recursive: true });
      await writeFile(join(plugins, 'fault'), FAULT_PLUGIN);
      await chmod(join(plugins, 'fault'), 0o755);
      const i = MODES.indexOf(mode);
      await writeFile(
        join(host.confDir, '10-fault.conflist'),
        JSON.stringify({
          cniVersion: '1.0.0',
          name: 'fault',
          plugins: [
            {
              type: 'bridge',
              bridge: `fault${i}`,
              isGateway: true,
              ipam: {
                type: 'host-local',
                ranges: [[{ subnet: `10.80.${i}.0/24` }]],
                dataDir: join(host.dir, 'ipam-fault'),
              },
            },
            { type: 'fault', mode },
          ],
        }),
      );
      const agent = await host.start({
        args: ['--plugin-dir', PLUGIN_DIR, '--plugin-dir', plugins],
        env: { ALLOCNET_CNI_TIMEOUT_MS: '2500' },
      });
      const before = await host.ruleset();
      const id = `00000000-0000-4000-8000-00000000fb0${i}`;
      const began = Date.now();
      const result = await outcome(
        unary(
          host.alloc(),
          'SetupAllocNetwork',
          { allocId: id, namespace: 'default', jobId: 'web', groupName: 'g', network: 'fault' },
          { deadlineMs: 60_000 },
        ),
      );
      // At most three attempts of 2.5 s, 1–2 s apart.
      expect(Date.now() - began).toBeLessThan(20_000);
      if (status === 'ok') {
        expect(result).toBe('ok');
      } else {
        expect(result === 'ok' ? 'ok' : result[0]).toBe(status);
        expect(result === 'ok' ? '' : result[1]).toContain(says);
        // A failed setup leaves nothing: no record, no namespace, no address, no rule.
        expect(await unary(host.alloc(), 'ListAllocNetworks', {})).toEqual({ allocations: [] });
        expect(await host.namespaces()).toEqual([]);
        const reserved = (await readdir(join(host.dir, 'ipam-fault', 'fault'))).filter((f) =>
          /^[0-9a-f.:]+$/.test(f),
        );
        expect(reserved).toEqual([]);
        // Nothing a terminal would act on reaches the caller.
        const text = result === 'ok' ? '' : result[1];
        const controls = Array.from(text, (c) => c.codePointAt(0) ?? 0).filter(
          (n) => n < 0x20 || (n >= 0x7f && n <= 0x9f),
        );
        expect(controls).toEqual([]);
      }
      expect(await host.ruleset()).toBe(before);
      expect(await outcome(unary(host.alloc(), 'TeardownAllocNetwork', { allocId: id }))).toBe(
        'ok',
      );
      expect(await host.namespaces()).toEqual([]);
      expect(await agent.stop()).toEqual({ code: 0, signal: null });
    },
  );
});
