// @ts-check
// Part of the build, after tsc: the `allocnet` command's code (cli.ts and what it imports) bundled
// with esbuild into one CommonJS script, dist/allocnet.cjs, which dist/main.cjs compiles with V8's
// code cache (code-cache.ts; docs/cli.md, "How the command starts"). One file instead of some 100
// modules: each module costs Node's loader a resolve, a read and a compile. Bundled into it too:
// the packages `--local` and `cni` run on the node (cni, cni-configurator, iptables-node and what
// those use). What only some commands run (`--local`'s configurator, the agent's client, the
// progress bar) is still evaluated only by them: esbuild keeps what a module imports with
// `import()` in a function of its own, run at that `import()` (the loading test checks it).
//
// Left out, loaded from node_modules as before: the agent, the sandbox and the allocation runner
// (`allocnet agent` runs the agent's own command with its own copies of everything; main.ts
// imports them), @allocnet/proto's index, and the native modules. koffi, which @allocnet/libc
// loads with a `require` of its own, is then found from this package (a dependency of it here).
// The script sits beside dist/main.cjs, so that what reads a file relative to its module still
// finds it: the CLI's package.json (`cliVersion`) and the contract's JSON, copied from
// @allocnet/proto's dist.
import { copyFileSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const dist = fileURLToPath(new URL('../dist/', import.meta.url));
/** What earlier builds wrote: the ES module chunks of before the code cache, and these scripts. */
const OLD = /^(bundle-.*\.js|allocnet\.cjs|main\.cjs)(\.map)?$/;

for (const file of readdirSync(dist)) if (OLD.test(file)) rmSync(join(dist, file));

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

/**
 * What both scripts are built with: CommonJS for Node 20, the heavy packages left out, and a
 * module's own URL as an ES module has it (`new URL('../package.json', import.meta.url)`): the
 * script's, which Node (main.cjs) and code-cache.ts run with `__filename` as a CommonJS module.
 * @type {import('esbuild').BuildOptions}
 */
const SCRIPT = {
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  sourcemap: true,
  logLevel: 'warning',
  plugins: [heavyPackages],
  define: { 'import.meta.url': '__allocnetModuleUrl' },
  banner: {
    js: "const __allocnetModuleUrl = require('node:url').pathToFileURL(__filename).href;",
  },
};

await build({
  ...SCRIPT,
  entryPoints: [join(dist, 'cli.js')],
  outfile: join(dist, 'allocnet.cjs'),
  // commander too: `allocnet agent` is @allocnet/agent's own command, made with its commander,
  // whose errors the CLI tells by class (a second copy's would not be `instanceof` them).
  external: ['koffi', 'lmdb', 'msgpackr'],
  // protobufjs's optional `require`s, which esbuild cannot see; `long` is given to it explicitly
  // (@allocnet/proto's client-definition.ts).
  logOverride: { 'direct-eval': 'silent' },
});

// The entry, main.ts with code-cache.ts, as CommonJS too (`bin`: dist/main.cjs): an ES module
// entry makes Node set up its ES module loader first. tsc's dist/main.js goes, so that there is
// one entry.
await build({ ...SCRIPT, entryPoints: [join(dist, 'main.js')], outfile: join(dist, 'main.cjs') });
for (const file of ['main.js', 'main.js.map', 'main.d.ts', 'main.d.ts.map'])
  rmSync(join(dist, file), { force: true });

const proto = dirname(fileURLToPath(import.meta.resolve('@allocnet/proto/codes')));
copyFileSync(join(proto, 'descriptor.json'), join(dist, 'descriptor.json'));
