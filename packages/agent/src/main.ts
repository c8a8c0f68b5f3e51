#!/usr/bin/env node
// `allocnet-agent`: the agent without the CLI (tests, the systemd unit). `allocnet agent` is the
// same command mounted in the CLI. `-dev` runs it in @allocnet/dev-sandbox's sandbox, wired here
// (and in the CLI), not in the daemon's modules.
import { isDevError, runDevAgent } from '@allocnet/dev-sandbox';
import { runAgentCli } from './command.js';

const status = await runAgentCli(
  process.argv.slice(2),
  { stdout: process.stdout, stderr: process.stderr, env: process.env },
  { dev: { run: runDevAgent, isFailure: isDevError } },
);
process.exitCode = status;
// Everything is closed by now; a handle some library left open must not keep a stopped agent
// (and its service manager) waiting. The timer is unref'd: it fires only if something else holds
// the process.
setTimeout(() => process.exit(status), 2000).unref();
