import { readFileSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { execa } from 'execa';
import { REPO } from './paths.js';

/** Where a benchmark ran: what the numbers mean nothing without. */
export interface BenchEnvironment {
  readonly date: string;
  readonly cpu: string;
  readonly cores: number;
  readonly memoryGiB: number;
  readonly kernel: string;
  readonly node: string;
  readonly plugins: string;
  readonly iptables: string;
  readonly goCni: string;
  readonly loadAverage: string;
  /** The commit measured (`git rev-parse --short HEAD`), and whether the tree had changes. */
  readonly code: string;
}

async function quiet(file: string, args: readonly string[]): Promise<string> {
  const r = await execa(file, args, { reject: false });
  return r.exitCode === 0 ? r.stdout.trim() : `unknown (${file} exited ${r.exitCode ?? '?'})`;
}

/** The commit of the repository, with a word when files differ from it. */
async function code(): Promise<string> {
  const head = await quiet('git', ['-C', REPO, 'rev-parse', '--short', 'HEAD']);
  const changed = await execa(
    'git',
    ['-C', REPO, 'status', '--porcelain', '--untracked-files=no'],
    {
      reject: false,
    },
  );
  return changed.exitCode === 0 && changed.stdout.trim() !== ''
    ? `${head} with uncommitted changes`
    : head;
}

export async function environment(): Promise<BenchEnvironment> {
  const pkg = (name: string) => quiet('dpkg-query', ['-W', '-f=${Version}', name]);
  return {
    date: new Date().toISOString(),
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    kernel: release(),
    node: process.version,
    plugins: `containernetworking-plugins ${await pkg('containernetworking-plugins')}`,
    iptables: await quiet('iptables', ['--version']),
    goCni: `go-cni ${await pkg('golang-github-containerd-go-cni-dev')}`,
    loadAverage: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
    code: await code(),
  };
}
