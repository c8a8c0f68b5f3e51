// The Prometheus alerting rules the package ships (prometheus/allocnet-alerts.yml), checked and
// unit-tested by Debian's promtool (tools/setup.sh installs prometheus, which has it).
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('../prometheus/', import.meta.url));

function promtool(...args: string[]) {
  const run = spawnSync('promtool', args, { cwd: dir, encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}`, error: run.error };
}

describe('allocnet-alerts.yml', () => {
  it('passes promtool check rules', () => {
    const run = promtool('check', 'rules', 'allocnet-alerts.yml');
    expect([run.error, run.status, run.output]).toEqual([
      undefined,
      0,
      expect.stringContaining('SUCCESS: 5 rules found'),
    ]);
  });

  it('fires each alert on the series of its test, after its for, and not on quiet ones', () => {
    const run = promtool('test', 'rules', 'allocnet-alerts.test.yml');
    expect([run.error, run.status, run.output]).toEqual([
      undefined,
      0,
      expect.stringContaining('SUCCESS'),
    ]);
  });
});
