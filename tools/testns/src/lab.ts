// The lab's namespaces are made and removed by @allocnet/netns, the manager the runner and the
// dev sandbox use; what only tests do (commands inside, rulesets, veths) runs here through execa.
import { existsSync } from 'node:fs';
import { execa } from 'execa';
import { createIpNetnsManager } from '@allocnet/netns';
import { DEFAULT_CLIENT_SUBNET, clientLinkAddresses } from './client-link.js';
import { namespaceName, runPrefix } from './names.js';
import { comparableRuleset } from './ruleset.js';

export interface ExecResult {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ExecOptions {
  /** Written to stdin. */
  readonly input?: string;
  /** When false, a non-zero exit resolves instead of throwing. Default true. */
  readonly reject?: boolean;
}

/** One throwaway network namespace. */
export interface TestNetns {
  readonly name: string;
  /** `/run/netns/<name>`: what `nsenter --net=`, CNI_NETNS and iptables-node's `netns` take. */
  readonly path: string;
  readonly role: 'node' | 'container';
  /** Runs a command inside the namespace (`ip netns exec`); throws on a non-zero exit unless `reject: false`. */
  exec(argv: readonly string[], options?: ExecOptions): Promise<ExecResult>;
  /** The names of the links inside, `lo` included. */
  links(): Promise<string[]>;
  /**
   * `iptables-save` then `ip6tables-save` inside, made comparable (`comparableRuleset`: no
   * comments, counters zeroed, no table that holds nothing): two of them compare equal exactly
   * when the rules, chains and policies are the same.
   */
  ruleset(): Promise<string>;
}

export interface ClientOptions {
  /** The link's IPv4 /24, written as its network address. Default `10.99.0.0/24`. */
  readonly subnet?: string;
}

/** Another host on a node's link, made by `NetnsLab.client`. */
export interface TestClient {
  /** The client's namespace: `eth0` with `address`, `lo` up. */
  readonly netns: TestNetns;
  /** The client's address on `eth0` (`.2` of the subnet). */
  readonly address: string;
  /** The node's address on `to-client` (`.1` of the subnet): where the client reaches its host ports. */
  readonly nodeAddress: string;
}

export interface NetnsLab {
  /** The name prefix of this process's namespaces. */
  readonly prefix: string;
  readonly namespaces: readonly TestNetns[];
  /** A namespace standing for a node (a host): `lo` up, IPv4 and IPv6 forwarding on. */
  node(label?: string): Promise<TestNetns>;
  /** A namespace as a container runtime makes it: nothing inside but `lo`, down. */
  container(label?: string): Promise<TestNetns>;
  /** A veth pair with one end in each namespace, both ends up. */
  veth(a: TestNetns, aName: string, b: TestNetns, bName: string): Promise<void>;
  /**
   * Another host on the node's link: a container namespace labelled `client`, a veth from the
   * node's `to-client` to its `eth0`, `.1` of `subnet` on the node's end and `.2` on the client's
   * (both /24), the client's `lo` up. One per node: a second one would need `to-client` again.
   * A subnet that is not an IPv4 /24 is refused before anything is made.
   */
  client(node: TestNetns, options?: ClientOptions): Promise<TestClient>;
  /**
   * Takes a namespace the code under test made (under this run's prefix) into the lab, so that
   * `dispose` removes it as it removes its own.
   */
  adopt(name: string): void;
  /**
   * Removes every namespace this lab made: kills the processes still inside, deletes every link
   * but `lo`, deletes the namespace, then checks it is gone. Tries all of them even when one
   * fails, then throws an AggregateError. Calling it again does nothing.
   */
  dispose(): Promise<void>;
}

async function run(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
  const [file, ...args] = argv;
  if (file === undefined) throw new Error('empty command');
  const result = await execa(file, args, {
    reject: false,
    env: { LC_ALL: 'C' },
    ...(options.input === undefined ? { stdin: 'ignore' as const } : { input: options.input }),
  });
  const out = {
    exitCode: result.exitCode ?? -1,
    stdout: typeof result.stdout === 'string' ? result.stdout : '',
    stderr: typeof result.stderr === 'string' ? result.stderr : '',
  };
  if (options.reject !== false && out.exitCode !== 0) {
    const why = out.stderr.trim() || result.originalMessage || 'no error message';
    throw new Error(`${argv.join(' ')} failed (exit status ${out.exitCode}): ${why}`);
  }
  return out;
}

let labCount = 0;

/** Makes a lab; nothing exists until `node()` or `container()` is called. */
export function createNetnsLab(options: { readonly prefix?: string } = {}): NetnsLab {
  const prefix = options.prefix ?? runPrefix();
  const lab = ++labCount;
  const netns = createIpNetnsManager();
  let seq = 0;
  const made: TestNetns[] = [];
  let disposed = false;

  function handle(name: string, role: TestNetns['role']): TestNetns {
    const path = netns.pathOf(name);
    return {
      name,
      path,
      role,
      exec: (argv, execOptions) => run(['ip', 'netns', 'exec', name, ...argv], execOptions),
      links: () => netns.links(name),
      ruleset: async () => {
        const [v4, v6] = await Promise.all(
          ['iptables-save', 'ip6tables-save'].map((save) =>
            run(['ip', 'netns', 'exec', name, save]),
          ),
        );
        return comparableRuleset(`${v4?.stdout ?? ''}\n${v6?.stdout ?? ''}`);
      },
    };
  }

  /** A new namespace, recorded before it exists so that a failure halfway is still cleaned up. */
  async function add(
    role: TestNetns['role'],
    label: string,
    make: (name: string) => Promise<string>,
  ): Promise<TestNetns> {
    if (disposed) throw new Error('this lab is disposed');
    const ns = handle(namespaceName(prefix, lab, ++seq, label), role);
    made.push(ns);
    await make(ns.name);
    return ns;
  }

  function container(label = 'ctr'): Promise<TestNetns> {
    return add('container', label, (name) => netns.create(name));
  }

  async function veth(a: TestNetns, aName: string, b: TestNetns, bName: string): Promise<void> {
    await run([
      'ip',
      '-n',
      a.name,
      'link',
      'add',
      aName,
      'type',
      'veth',
      'peer',
      'name',
      bName,
      'netns',
      b.name,
    ]);
    await run(['ip', '-n', a.name, 'link', 'set', aName, 'up']);
    await run(['ip', '-n', b.name, 'link', 'set', bName, 'up']);
  }

  async function remove(ns: TestNetns): Promise<void> {
    // A plain file check, not `netns.exists`: a file left by a half-made namespace goes too.
    if (!existsSync(ns.path)) return;
    // A file that is not a namespace (`ip netns add` killed between making the file and mounting
    // the namespace on it) has no process or link inside, and `ip -n` refuses it: only the
    // file is left to delete, which `ip netns del` does.
    if (await netns.exists(ns.path)) {
      await netns.killAll(ns.name);
      for (const link of await netns.links(ns.name)) {
        // Deleting one end of a veth removes its peer, which may be listed here too: then it is
        // not found, which deleteLink answers with false.
        if (link !== 'lo') await netns.deleteLink(ns.name, link);
      }
    }
    await netns.remove(ns.name);
    if (existsSync(ns.path))
      throw new Error(`namespace ${ns.name} is still there after ip netns del`);
  }

  return {
    prefix,
    namespaces: made,

    node(label = 'node') {
      return add('node', label, (name) => netns.createNode(name, { ipv6Forwarding: true }));
    },

    container,
    veth,

    async client(node, clientOptions = {}) {
      const addresses = clientLinkAddresses(clientOptions.subnet ?? DEFAULT_CLIENT_SUBNET);
      const client = await container('client');
      await veth(node, 'to-client', client, 'eth0');
      await run(['ip', '-n', node.name, 'addr', 'add', `${addresses.node}/24`, 'dev', 'to-client']);
      await run(['ip', '-n', client.name, 'addr', 'add', `${addresses.client}/24`, 'dev', 'eth0']);
      await run(['ip', '-n', client.name, 'link', 'set', 'lo', 'up']);
      return { netns: client, address: addresses.client, nodeAddress: addresses.node };
    },

    adopt(name) {
      if (disposed) throw new Error('this lab is disposed');
      if (!name.startsWith(`${prefix}-`))
        throw new Error(`namespace ${name} does not carry this run's prefix ${prefix}`);
      if (!made.some((ns) => ns.name === name)) made.push(handle(name, 'container'));
    },

    async dispose() {
      if (disposed) return;
      disposed = true;
      const results = await Promise.allSettled(made.map(remove));
      const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
      if (errors.length > 0)
        throw new AggregateError(errors, `removing ${errors.length} test namespace(s) failed`);
    },
  };
}

/** Runs `fn` with a fresh lab and disposes it in `finally`, whatever `fn` did. */
export async function withNetnsLab<T>(
  fn: (lab: NetnsLab) => Promise<T>,
  options?: { readonly prefix?: string },
): Promise<T> {
  const lab = createNetnsLab(options);
  try {
    return await fn(lab);
  } finally {
    await lab.dispose();
  }
}

/**
 * Fails loudly unless this process can make namespaces and run iptables in them: integration
 * tests need root and these commands, and must fail, not skip, where they are missing.
 */
export async function requireNetworkTestHost(
  commands: readonly string[] = ['ip', 'iptables', 'ip6tables', 'nsenter'],
): Promise<void> {
  const problems: string[] = [];
  if (process.getuid?.() !== 0) problems.push(`runs as uid ${process.getuid?.() ?? '?'}, not root`);
  for (const command of commands) {
    const found = await run(['sh', '-c', 'command -v "$1"', 'sh', command], { reject: false });
    if (found.exitCode !== 0) problems.push(`${command} is not installed`);
  }
  if (problems.length > 0) {
    throw new Error(
      `these tests need root and real networking tools (run tools/setup.sh as root): ${problems.join('; ')}`,
    );
  }
}
