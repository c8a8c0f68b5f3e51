#!/usr/bin/env node
// The main job (`tools/start.sh`): a dev agent (`allocnet agent -dev`: a sandbox namespace standing
// for the node, its state in a temp dir) and a walk through what allocnet does, every step a real
// `allocnet` command with its real output:
//   three allocations with ports; one reached through its host port from a client on another
//   "host"; one allocation's namespace deleted out of band, its tagged NAT rules before and after
//   its teardown (which removes them itself; the audit finds nothing left); `allocnet leaks`
//   showing nothing left; everything removed at the end.
// Nothing runs in the host's own network namespace; the sandbox, the allocations' namespaces, the
// client namespace and the temp dir are removed at the end, also on failure or Ctrl-C.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { echo, startEchoServer } from '@allocnet/testns';
import type { EchoServer } from '@allocnet/testns';

const here = dirname(fileURLToPath(import.meta.url));
const CLI = resolve(here, '..', '..', '..', 'packages', 'cli', 'dist', 'main.cjs');
const bold = (s: string) => (process.stdout.isTTY ? `\u001b[1m${s}\u001b[0m` : s);
const dim = (s: string) => (process.stdout.isTTY ? `\u001b[2m${s}\u001b[0m` : s);

function step(n: number, title: string): void {
  console.log(`\n${bold(`${n}. ${title}`)}`);
}

interface DevAgent {
  readonly socket: string;
  readonly sandbox: string;
  stop(): Promise<number | null>;
}

/** `allocnet agent -dev`, until it prints where it listens. */
async function startDevAgent(): Promise<DevAgent> {
  const child = spawn(process.execPath, [CLI, 'agent', '-dev', '--log-format', 'json'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((done) => child.once('close', done));
  let out = '';
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const ready = await new Promise<{ socket: string; sandbox: string }>((done, fail) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const socket = /socket:\s+(\S+)/.exec(out)?.[1];
      const sandbox = /sandbox network namespace (\S+)/.exec(out)?.[1];
      if (socket !== undefined && sandbox !== undefined && out.includes('Ctrl-C'))
        done({ socket, sandbox });
    });
    void exited.then((code) => {
      fail(
        new Error(`the dev agent exited (${code ?? 'signal'}) before it was ready:\n${out}${err}`),
      );
    });
  });
  for (const line of out.trim().split('\n')) console.log(dim(`   ${line}`));
  return {
    ...ready,
    async stop() {
      child.kill('SIGTERM');
      const code = await exited;
      const last = out.trim().split('\n').at(-1);
      if (last !== undefined) console.log(dim(`   ${last}`));
      return code;
    },
  };
}

/** Runs `allocnet <args>`, printing the command and its output as a terminal would. */
async function allocnet(socket: string, args: readonly string[]): Promise<string> {
  console.log(`   $ allocnet ${args.join(' ')}`);
  const r = await execa(process.execPath, [CLI, ...args], {
    reject: false,
    env: { ALLOCNET_ADDRESS: socket },
  });
  const text = `${r.stdout}${r.stderr === '' ? '' : `\n${r.stderr}`}`.trim();
  for (const line of text.split('\n')) console.log(`   ${line}`);
  if (r.exitCode !== 0)
    throw new Error(`allocnet ${args.join(' ')} exited ${r.exitCode ?? 'on a signal'}`);
  return r.stdout;
}

async function sh(argv: readonly string[]): Promise<string> {
  console.log(`   $ ${argv.join(' ')}`);
  const [file, ...args] = argv;
  return (await execa(file as string, args)).stdout;
}

/** The node's nat rules that name `allocId` (the plugins tag theirs with it), as iptables-save prints them. */
async function taggedNatRules(node: string, allocId: string): Promise<void> {
  console.log(`   $ ip netns exec ${node} iptables-save -t nat | grep ${allocId}`);
  const saved = (await execa('ip', ['netns', 'exec', node, 'iptables-save', '-t', 'nat'])).stdout;
  const lines = saved.split('\n').filter((line) => line.includes(allocId));
  for (const line of lines.length === 0 ? ['(none)'] : lines) console.log(`   ${line}`);
}

async function namespaces(): Promise<string[]> {
  return (await execa('ip', ['netns', 'list'])).stdout
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => n !== '');
}

async function main(): Promise<void> {
  const client = `allocnet-demo-client-${randomBytes(3).toString('hex')}`;
  let agent: DevAgent | undefined;
  // Namespaces the demo (and its agent) may make: the client, the sandbox and `<sandbox>-<alloc>`.
  const owned = [client];
  let server: EchoServer | undefined;
  const cleanup = async () => {
    await server?.stop();
    await execa('ip', ['netns', 'del', client], { reject: false });
    const code = await agent?.stop();
    agent = undefined;
    return code;
  };
  const onSignal = (signal: NodeJS.Signals) => {
    void cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.once('SIGINT', onSignal).once('SIGTERM', onSignal);

  console.log(bold('allocnet quickstart: a dev agent and three allocations, on this machine'));
  try {
    step(1, 'Start an agent in a sandbox node namespace (nothing on this host changes)');
    console.log('   $ allocnet agent -dev');
    agent = await startDevAgent();
    owned.push(agent.sandbox);
    const socket = agent.socket;

    step(2, 'Give three allocations their network, with host ports');
    await allocnet(socket, ['alloc', 'setup', 'web-1', '--port', 'http:8080:80']);
    await allocnet(socket, ['alloc', 'setup', 'web-2', '--port', 'http:8081:80']);
    await allocnet(socket, ['alloc', 'setup', 'db-1', '--port', 'pg:5432']);
    await allocnet(socket, ['alloc', 'list']);

    step(3, 'Reach web-1 through host port 8080 from a client on another host');
    console.log(
      dim(`   (a client namespace ${client}, cabled to the node: 10.99.0.2 → 10.99.0.1)`),
    );
    await execa('ip', ['netns', 'add', client]);
    await execa('ip', ['-n', agent.sandbox, 'link', 'add', 'to-client', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', client]); // prettier-ignore
    await execa('ip', ['-n', agent.sandbox, 'addr', 'add', '10.99.0.1/24', 'dev', 'to-client']);
    await execa('ip', ['-n', agent.sandbox, 'link', 'set', 'to-client', 'up']);
    await execa('ip', ['-n', client, 'addr', 'add', '10.99.0.2/24', 'dev', 'eth0']);
    await execa('ip', ['-n', client, 'link', 'set', 'eth0', 'up']);
    await execa('ip', ['-n', client, 'link', 'set', 'lo', 'up']);
    const web1 = `${agent.sandbox}-web-1`;
    console.log(dim(`   (web-1 runs an echo server on port 80 in ${web1})`));
    server = await startEchoServer(web1, 80);
    for (const protocol of ['tcp', 'udp'] as const) {
      const answer = await echo(client, protocol, '10.99.0.1', 8080, 'hello from the client');
      console.log(`   ${protocol} 10.99.0.2 → 10.99.0.1:8080 answered: ${JSON.stringify(answer)}`);
    }
    await server.stop();
    server = undefined;

    step(4, 'web-2’s namespace disappears out of band (a crashed pause container, say)');
    await sh(['ip', 'netns', 'del', `${agent.sandbox}-web-2`]);
    console.log(dim('   Its NAT rules are still on the node, tagged with its id:'));
    await taggedNatRules(agent.sandbox, 'web-2');
    console.log(
      dim(
        '   The teardown removes web-2’s DNAT and masquerade chains itself (one iptables-restore)\n' +
          '   while the plugins’ DEL does the rest; its audit then finds nothing left behind:',
      ),
    );
    await allocnet(socket, ['alloc', 'teardown', 'web-2']);
    await taggedNatRules(agent.sandbox, 'web-2');

    step(5, 'Nothing is left tagged with an allocation the agent does not know');
    const leaks = await allocnet(socket, ['leaks']);
    if (!leaks.includes('0 leaked allocation(s)')) throw new Error('the agent reports leaks');

    step(6, 'Tear the rest down and stop the agent');
    await allocnet(socket, ['alloc', 'teardown', 'web-1']);
    await allocnet(socket, ['alloc', 'teardown', 'db-1']);
  } finally {
    const code = await cleanup();
    if (code !== undefined && code !== 0) process.exitCode = 1;
  }
  // Only the demo's own: other programs may make namespaces meanwhile.
  const left = (await namespaces()).filter((n) =>
    owned.some((o) => n === o || n.startsWith(`${o}-`)),
  );
  if (left.length > 0) throw new Error(`namespaces left behind: ${left.join(', ')}`);
  console.log(
    `\n${bold('Done.')} The sandbox, the allocations’ namespaces and the state are gone.`,
  );
  console.log('Run the agent for real with systemd: see README.md, "Running the agent".');
}

main().catch((error: unknown) => {
  console.error(`\nthe demo failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
});
