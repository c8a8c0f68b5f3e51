// The CLI loads what its command uses (docs/cli.md): the built `allocnet` run in a child with a
// loader hook that records every module loaded as a file, and the packages a command must not
// load looked for by name. The command's own code is one script (scripts/bundle.mjs): which of
// the modules bundled into it a command evaluated is read from V8's coverage of the script
// (NODE_V8_COVERAGE): esbuild runs a module that is imported with `import()` somewhere in a
// function of its own, named by the module's path, and the coverage says whether it ran; a module
// without such a function runs at every start. Needs the CLI built (turbo's `test` builds it
// first).
import { execFile } from 'node:child_process';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { tempDir } from '@allocnet/cni/testing';
import { loadAllocnetProto } from '@allocnet/proto';
import type { AllocNetworkServiceHandlers, OperatorServiceHandlers } from '@allocnet/proto';

const MAIN = fileURLToPath(new URL('../dist/main.cjs', import.meta.url));
const RECORDER = fileURLToPath(new URL('./fixtures/record-modules.mjs', import.meta.url));

/** What a short command must not load: the agent and what only it and `--local` use. */
const HEAVY = [
  '@allocnet/agent',
  '@allocnet/dev-sandbox',
  '@allocnet/alloc-runner',
  '@allocnet/cni-configurator',
  '@allocnet/cni',
  '@allocnet/iptables-node',
  '@allocnet/libc',
  '@allocnet/proto',
  'lmdb',
  'koffi',
  'winston',
  'prom-client',
  '@grpc/proto-loader',
  'io-ts',
  'yaml',
];
/** And a command that makes no call loads no gRPC at all. */
const GRPC = ['@grpc/grpc-js', 'protobufjs'];

/**
 * The package a recorded module belongs to: an npm package by its name, a workspace package's
 * index by its name (`@allocnet/agent`) and any other of its modules by name and file
 * (`@allocnet/agent/defaults.js`, which a subpath export loads on its own).
 */
function packageOf(line: string): string | undefined {
  const path = line.startsWith('file://') ? fileURLToPath(line) : line;
  const npm = /.*node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
  if (npm !== null) return npm[1];
  const workspace = /\/packages\/([^/]+)\/dist\/(.+)$/.exec(path);
  if (workspace === null) return undefined;
  const [, name = '', file = ''] = workspace;
  return file === 'index.js' ? `@allocnet/${name}` : `@allocnet/${name}/${file}`;
}

/** A bundled module's package by its path in the bundle (`../../node_modules/.pnpm/<pkg>@<v>/node_modules/<pkg>/…` for npm packages, `../<name>/dist/<file>` for workspace ones, `dist/<file>` for the CLI's own), by `packageOf`'s names. */
function bundledPackage(module: string): string | undefined {
  const npm = /.*node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(module);
  if (npm !== null) return npm[1];
  const workspace = /^\.\.\/([^/]+)\/dist\/(.+)$/.exec(module);
  if (workspace !== null)
    return workspace[2] === 'index.js'
      ? `@allocnet/${workspace[1]}`
      : `@allocnet/${workspace[1]}/${workspace[2]}`;
  const own = /^dist\/(.+)$/.exec(module);
  return own === null ? undefined : `@allocnet/cli/${own[1]}`;
}

const BUNDLE = fileURLToPath(new URL('../dist/allocnet.cjs', import.meta.url));

/**
 * The modules of the bundle a run evaluated, by path: those esbuild runs at the start (no
 * function of their own), and those whose function ran, by the coverage in `coverageDir`.
 */
async function evaluatedInBundle(coverageDir: string): Promise<string[]> {
  const text = await readFile(BUNDLE, 'utf8');
  const modules = new Set(
    [...text.matchAll(/^\/\/ ((?:\.\.\/|dist\/)\S+)$/gm)].map((m) => m[1] ?? ''),
  );
  const wrapped = new Set(
    [...text.matchAll(/= __(?:esm|commonJS)\(\{\n {2}"([^"]+)"\(/g)].map((m) => m[1] ?? ''),
  );
  const ran = new Set([...modules].filter((m) => !wrapped.has(m)));
  for (const name of await readdir(coverageDir)) {
    const { result } = JSON.parse(await readFile(join(coverageDir, name), 'utf8')) as {
      result: {
        url: string;
        functions: { functionName: string; ranges: { count: number }[] }[];
      }[];
    };
    for (const script of result)
      if (script.url === pathToFileURL(BUNDLE).href)
        for (const f of script.functions)
          if (wrapped.has(f.functionName) && (f.ranges[0]?.count ?? 0) > 0) ran.add(f.functionName);
  }
  return [...ran];
}

let dir: Awaited<ReturnType<typeof tempDir>>;
beforeEach(async () => {
  dir = await tempDir();
});
afterEach(async () => {
  await dir.remove();
});

/** Runs the built CLI with `args`; resolves its exit status, stdout and the packages it loaded. */
async function run(...args: string[]) {
  const id = Math.random().toString(36).slice(2);
  const file = join(dir.path, `modules-${id}.txt`);
  const coverage = join(dir.path, `coverage-${id}`);
  const { code, stdout } = await new Promise<{ code: number; stdout: string }>((resolve) => {
    execFile(
      process.execPath,
      ['--import', RECORDER, MAIN, ...args],
      {
        env: {
          ...process.env,
          ALLOCNET_RECORD_MODULES: file,
          NODE_V8_COVERAGE: coverage,
          ALLOCNET_CLI_CACHE_DIR: 'off',
        },
      },
      (error, out) => {
        resolve({ code: error === null ? 0 : Number(error.code), stdout: out });
      },
    );
  });
  const lines = (await readFile(file, 'utf8')).split('\n');
  /** The packages of the files loaded, each read from its own file. */
  const files = new Set(lines.map(packageOf).filter((p) => p !== undefined));
  const packages = new Set(files);
  for (const module of await evaluatedInBundle(coverage)) {
    const name = bundledPackage(module);
    if (name !== undefined) packages.add(name);
  }
  return { code, stdout, packages, files };
}

/** Each test starts a few Node processes, on a machine that may be busy. */
const TIMEOUT_MS = 60_000;

const among = (packages: Set<string>, names: readonly string[]) =>
  names.filter((name) => packages.has(name));

describe('what a command loads', () => {
  it(
    '--help, alloc list --help and version without an agent: no agent, no gRPC',
    async () => {
      const socket = join(dir.path, 'none.sock');
      for (const args of [
        ['--help'],
        ['alloc', 'list', '--help'],
        ['version', '--address', socket],
      ]) {
        const { code, stdout, packages } = await run(...args);
        expect({ args, code }).toEqual({ args, code: 0 });
        expect(stdout).not.toBe('');
        // the recorder saw the CLI itself and its parser
        expect(among(packages, ['@allocnet/cli/main.cjs', 'commander'])).toEqual([
          '@allocnet/cli/main.cjs',
          'commander',
        ]);
        expect({ args, loaded: among(packages, [...HEAVY, ...GRPC]) }).toEqual({
          args,
          loaded: [],
        });
      }
    },
    TIMEOUT_MS,
  );

  it(
    "alloc list and version through an agent: protobufjs, but not grpc-js, proto-loader nor the agent's packages",
    async () => {
      const server = new grpc.Server();
      const { AllocNetworkService, OperatorService } = loadAllocnetProto().allocnet.v1;
      const alloc: Partial<AllocNetworkServiceHandlers> = {
        ListAllocNetworks(_call, callback) {
          callback(null, { allocations: [] });
        },
        GetAllocNetwork(call, callback) {
          // above 2^53: the bundled decoder must keep int64 exact
          callback(null, {
            status: { allocId: call.request.allocId, updatedAtUnixMs: '9007199254740993' },
          });
        },
      };
      const operator: Partial<OperatorServiceHandlers> = {
        GetAgentInfo(_call, callback) {
          callback(null, { version: '9.9.9' });
        },
      };
      server.addService(AllocNetworkService.service, alloc as grpc.UntypedServiceImplementation);
      server.addService(OperatorService.service, operator as grpc.UntypedServiceImplementation);
      const socket = join(dir.path, 'agent.sock');
      await new Promise<void>((resolve, reject) => {
        server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (error) => {
          if (error) reject(error);
          else resolve();
        });
      });
      try {
        const list = await run('alloc', 'list', '--address', socket);
        expect({ code: list.code, stdout: list.stdout }).toEqual({
          code: 0,
          stdout: 'no allocations\n',
        });
        // the call goes over node:http2 (@allocnet/proto/call), its messages through protobufjs
        expect(among(list.packages, GRPC)).toEqual(['protobufjs']);
        expect(among(list.packages, HEAVY)).toEqual([]);
        const status = await run('alloc', 'status', 'a1', '--json', '--address', socket);
        expect(JSON.parse(status.stdout)).toMatchObject({
          allocId: 'a1',
          updatedAtUnixMs: '9007199254740993',
        });
        const version = await run('version', '--address', socket);
        expect(version.stdout).toBe(`allocnet 0.1.0\nagent 9.9.9 at ${socket}\n`);
        expect(among(version.packages, [...HEAVY, '@grpc/grpc-js'])).toEqual([]);
      } finally {
        server.forceShutdown();
      }
    },
    TIMEOUT_MS,
  );

  it(
    "--local runs the node's packages from the bundle, not file by file, and not the agent",
    async () => {
      // A namespace outside /run/netns: the command loads what it runs with, then refuses it
      // before anything runs.
      const { code, packages, files } = await run('leaks', '--local', '--host-netns', dir.path);
      expect(code).toBe(2);
      // Bundled modules are named by package and file (`@allocnet/iptables-node/save.js`).
      const of = (names: Set<string>, pkg: string) =>
        [...names].some((name) => name === pkg || name.startsWith(`${pkg}/`));
      const node = ['@allocnet/cni-configurator', '@allocnet/cni', '@allocnet/iptables-node'];
      expect(node.filter((pkg) => of(packages, pkg))).toEqual(node);
      const apart = [...HEAVY.filter((name) => name !== 'koffi'), ...GRPC];
      expect(apart.filter((pkg) => of(files, pkg))).toEqual([]);
    },
    TIMEOUT_MS,
  );

  it(
    'agent --help loads the agent, whose command it is; its usage errors exit 2',
    async () => {
      const { code, stdout, packages } = await run('agent', '--help');
      expect(code).toBe(0);
      // The agent's command is made with its own commander, not the one bundled into the CLI:
      // its usage error still exits 2 (cli.ts, `isCommanderError`).
      expect((await run('agent', '--no-such-flag')).code).toBe(2);
      expect(stdout).toContain('Usage: allocnet agent [options]');
      expect(among(packages, ['@allocnet/agent', '@allocnet/dev-sandbox'])).toEqual([
        '@allocnet/agent',
        '@allocnet/dev-sandbox',
      ]);
    },
    TIMEOUT_MS,
  );
});
