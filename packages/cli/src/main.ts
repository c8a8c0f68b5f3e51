#!/usr/bin/env node
// The `allocnet` command: the bundle of cli.ts (dist/allocnet.cjs, scripts/bundle.mjs), compiled
// with its code cache (code-cache.ts), run with this process's argv and stdio. Built into
// dist/main.cjs, with code-cache.ts, as CommonJS: Node then starts without its ES module loader
// (about 16 ms of `allocnet version`'s start, docs/cli.md).
import { homedir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import type * as Cli from './cli.js';
import { cacheDirOf, commandKey, loadBundle } from './code-cache.js';

// A command lives for a fraction of a second: its young generation may as well grow at once to
// V8's largest (16 MiB a half) instead of doubling from 1 MiB, scavenge after scavenge copying
// what survives. A cold `leaks --reap --local` of 1,000 leaks read and kept tens of MiB of rules:
// 11 collections and 41-50 ms of pauses before, 4 and 19-23 ms after (docs/cli.md). V8 reads the
// factor at each growth; set before the bundle is compiled, so that the code cache's flag hash is
// the same for the run that writes it and the runs that read it.
setFlagsFromString('--semi-space-growth-factor=16');
// And it ends before most of what TurboFan would optimize pays for its compiling: the budget of
// bytecode a function runs between V8's looks at its hotness, 67,584 by default, raised about
// threefold. A cold `leaks --reap --local` of 1,000 leaks compiled 86 functions (356 ms on the
// compiler's thread, beside the main one on a 2-core node) and deoptimized 7; with this, 39 (118
// ms) and none, and the command took 70-100 ms less (paired medians, docs/cli.md).
setFlagsFromString('--interrupt-budget=200000');

const argv = process.argv.slice(2);
const uid = process.getuid?.();
const bundle = loadBundle(
  fileURLToPath(new URL('./allocnet.cjs', import.meta.url)),
  commandKey(argv),
  cacheDirOf(process.env, uid, homedir()),
  uid,
);
process.once('exit', bundle.save);
const cli = bundle.exports as typeof Cli;

// A reader that stops early (`allocnet alloc list | head -1`) closes the pipe, and what is left
// has nowhere to go: the command ends as a program killed by SIGPIPE does (128 + 13), quietly,
// not with Node's trace of an unhandled 'error' (Node ignores the signal itself).
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(cli.SIGPIPE_EXIT);
});

// The agent's packages are not in the bundle: imported from here, as modules. No top-level
// `await`: this file runs as CommonJS (dist/main.cjs). A rejection, a bug, ends the process as
// an unhandled one does, with its stack.
void cli
  .runCli(argv, { stdout: process.stdout, stderr: process.stderr, env: process.env }, () =>
    Promise.all([import('@allocnet/agent'), import('@allocnet/dev-sandbox')]),
  )
  .then((code) => {
    process.exitCode = code;
  });
