// @ts-check
// Part of the build, after tsc: the `allocnet` command (dist/main.js) bundled with esbuild, so
// that a short command loads a few files instead of some 100 modules (its own, protobufjs's,
// @allocnet/proto's client and base, the packages' defaults): each module costs Node's loader a resolve, a read and
// a compile (docs/cli.md, "How the command starts"). What each command imports when it runs
// stays a separate chunk (`import()` splits), loaded only by that command.
//
// Bundled too, into the chunks only `--local` and `cni` load: the packages they run on the node
// (cni, cni-configurator, iptables-node and what those use), so that `allocnet leaks --local`
// loads 17 files instead of some 130 (110 ms less on an empty node, docs/cli.md). No process
// holds two copies of them: such a command loads neither the agent nor the sandbox, which carry
// their own. koffi, which @allocnet/libc loads with a `require` of its own, is then found from
// this package (a dependency of it here).
//
// Left out, loaded from node_modules as before: the agent, the sandbox and the allocation runner
// (`allocnet agent` runs the agent's own command with its own copies of everything), and the
// native modules. The chunks are written beside dist/main.js, so that what reads a file relative
// to its module still finds it: the CLI's package.json (`cliVersion`) and the contract's JSON,
// copied from @allocnet/proto's dist.
import { copyFileSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const dist = fileURLToPath(new URL('../dist/', import.meta.url));
const CHUNK = /^bundle-.*\.js(\.map)?$/;

// tsc wrote dist/main.js and the modules it imports; chunks of an earlier build go.
for (const file of readdirSync(dist)) if (CHUNK.test(file)) rmSync(join(dist, file));

/**
 * The @allocnet packages left out, by their index; their light subpaths (`@allocnet/agent/defaults`,
 * `@allocnet/proto/call`, …) and @allocnet/base (no state of its own) are bundled.
 */
const HEAVY = new Set([
  '@allocnet/agent',
  '@allocnet/alloc-runner',
  '@allocnet/dev-sandbox',
  '@allocnet/proto',
]);

/** @type {import('esbuild').Plugin} */
const heavyPackages = {
  name: 'heavy-packages',
  setup(b) {
    b.onResolve({ filter: /^@allocnet\/[^/]+$/ }, (args) =>
      HEAVY.has(args.path) ? { path: args.path, external: true } : undefined,
    );
  },
};

await build({
  entryPoints: [join(dist, 'main.js')],
  outdir: dist,
  allowOverwrite: true,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  chunkNames: 'bundle-[hash]',
  sourcemap: true,
  logLevel: 'warning',
  // commander too: `allocnet agent` is @allocnet/agent's own command, made with its commander,
  // whose errors the CLI tells by class (a second copy's would not be `instanceof` them).
  external: ['koffi', 'lmdb', 'msgpackr'],
  plugins: [heavyPackages],
  // The CommonJS packages bundled (protobufjs, cli-progress, …) require Node's modules.
  banner: {
    js: "import { createRequire as __allocnetRequire } from 'node:module'; const require = __allocnetRequire(import.meta.url);",
  },
  // protobufjs's optional `require`s, which esbuild cannot see; `long` is given to it explicitly
  // (@allocnet/proto's client-definition.ts).
  logOverride: { 'direct-eval': 'silent' },
});

const proto = dirname(fileURLToPath(import.meta.resolve('@allocnet/proto/codes')));
copyFileSync(join(proto, 'descriptor.json'), join(dist, 'descriptor.json'));
