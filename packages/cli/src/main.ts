#!/usr/bin/env node
import { SIGPIPE_EXIT, runCli } from './cli.js';

// A reader that stops early (`allocnet alloc list | head -1`) closes the pipe, and what is left
// has nowhere to go: the command ends as a program killed by SIGPIPE does (128 + 13), quietly,
// not with Node's trace of an unhandled 'error' (Node ignores the signal itself).
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(SIGPIPE_EXIT);
});

process.exitCode = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
});
