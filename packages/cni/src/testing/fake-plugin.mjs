#!/usr/bin/env node
// A recording fake CNI plugin: a test fixture, never installed. Copy it into a plugin directory
// under any name (installFakePlugin does); it reads `<itself>.debug.json` to know how to answer
// and appends one JSON line per call to `<itself>.log.jsonl` with what it was given: argv, the
// CNI_* entries of its raw environment and every variable's name (duplicates visible), stdin,
// and its network namespace.
//
// Debug file (every key optional):
//   { "versions": ["0.3.1", "1.0.0"],               // what VERSION advertises
//     "ADD" | "DEL" | "CHECK" | "STATUS" | "GC" | "VERSION": {
//       "result": {...},                              // printed on stdout (cniVersion filled in)
//       "error": { "code": 7, "msg": "…", "details": "…" },
//       "errorStream": "stdout" | "stderr",          // where the error JSON goes (default stdout)
//       "stdout": "raw", "stderr": "raw",             // printed as they are
//       "exitCode": 3,                                // default 1 with an error, else 0
//       "delayMs": 100 } }                            // wait before answering
// Without an answer: VERSION prints the versions; ADD echoes prevResult (or a bare result);
// other verbs print nothing. A cniVersion the plugin does not advertise gets error code 1.
import { appendFileSync, readFileSync, readlinkSync } from 'node:fs';

const self = process.argv[1] ?? 'fake';
const ALL = ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];

function readDebug() {
  try {
    return JSON.parse(readFileSync(`${self}.debug.json`, 'utf8'));
  } catch (error) {
    if (error.code === 'ENOENT') return {};
    throw error;
  }
}

function rawEnv() {
  return readFileSync('/proc/self/environ', 'utf8')
    .split('\0')
    .filter((entry) => entry !== '');
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

function write(stream, text) {
  return new Promise((resolve) => stream.write(text, () => resolve()));
}

const stdin = await readStdin();
const command = process.env.CNI_COMMAND ?? '';
appendFileSync(
  `${self}.log.jsonl`,
  `${JSON.stringify({
    command,
    argv: process.argv.slice(2),
    env: rawEnv().filter((entry) => entry.startsWith('CNI_')),
    envNames: rawEnv().map((entry) => entry.slice(0, entry.indexOf('='))),
    stdin,
    netns: readlinkSync('/proc/self/ns/net'),
    pid: process.pid,
  })}\n`,
);

const debug = readDebug();
const versions = debug.versions ?? ALL;
const answer = debug[command] ?? {};
function parseStdin() {
  try {
    return stdin.trim() === '' ? {} : JSON.parse(stdin);
  } catch {
    // An unparseable stdin is answered below like a real plugin: error code 6.
    return undefined;
  }
}
const conf = parseStdin();
const cniVersion = conf?.cniVersion ?? '1.0.0';

if (answer.delayMs) await new Promise((resolve) => setTimeout(resolve, answer.delayMs));

let exitCode = answer.exitCode ?? 0;
let error = answer.error;
if (conf === undefined) error = { code: 6, msg: 'failed to decode stdin' };
else if (error === undefined && command !== 'VERSION' && !versions.includes(cniVersion)) {
  error = {
    code: 1,
    msg: 'incompatible CNI versions',
    details: `config is "${cniVersion}", plugin supports ${JSON.stringify(versions)}`,
  };
}

if (answer.stdout !== undefined) await write(process.stdout, answer.stdout);
if (answer.stderr !== undefined) await write(process.stderr, answer.stderr);
if (error !== undefined) {
  const stream = answer.errorStream === 'stderr' ? process.stderr : process.stdout;
  await write(stream, `${JSON.stringify({ cniVersion, ...error })}\n`);
  exitCode = answer.exitCode ?? 1;
} else if (answer.stdout === undefined) {
  let out;
  if (answer.result !== undefined) out = { cniVersion, ...answer.result };
  else if (command === 'VERSION') out = { cniVersion, supportedVersions: versions };
  else if (command === 'ADD') out = { ...(conf.prevResult ?? {}), cniVersion };
  if (out !== undefined) await write(process.stdout, `${JSON.stringify(out)}\n`);
}
process.exitCode = exitCode;
