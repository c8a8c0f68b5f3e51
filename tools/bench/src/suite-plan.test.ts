import { parseSuiteArgs } from './suite-plan.js';

describe('parseSuiteArgs', () => {
  it('takes every scenario in --only, the new ones included', () => {
    const flags = parseSuiteArgs(['--only', 'cli,reap-cli,scale']);
    expect([...flags.only]).toEqual(['cli', 'reap-cli', 'scale']);
  });

  it('refuses a scenario it does not know, naming the flag', () => {
    expect(() => parseSuiteArgs(['--only', 'cli,startup'])).toThrow(
      expect.objectContaining({ code: 'invalid-flag', flag: '--only' }) as Error,
    );
  });

  it('climbs to 250 with --quick, so that the dense-node goal and go-cni’s climb run in a smoke run', () => {
    const quick = parseSuiteArgs(['--quick']).plan;
    expect(quick.scale.live).toBe(250);
    expect(quick.scale.peerLive).toBe(250);
    const full = parseSuiteArgs([]).plan;
    expect(full.scale.live).toBe(1000);
    expect(full.cli.rounds).toBeGreaterThanOrEqual(15);
    expect(full.scale.listRounds).toBeGreaterThanOrEqual(10);
  });
});
