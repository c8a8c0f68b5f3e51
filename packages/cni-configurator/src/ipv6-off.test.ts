// withIpv6Off (ipv6-off.ts) against a recording kernel: in the allocation's own namespace, the
// default is off exactly while the ADD runs and put back as it was, whatever the ADD's outcome;
// in another's, the interface's own is turned off after the ADD. What the bridge plugin's
// interface then is, is checked on real namespaces in integration (alloc-runner.test.ts).
import type { ConfiguratorContext } from './context.js';
import { ConfiguratorError } from './errors.js';
import { withIpv6Off } from './ipv6-off.js';
import type { NodeKernel } from './node.js';
import { recordingNode } from './testing/index.js';

const NETNS = '/run/netns/a1';
const NAME = 'net/ipv6/conf/default/disable_ipv6';
const LOG = { allocId: 'a1', network: 'nomad' };
const OWN = { netns: NETNS, ifName: 'eth0', own: true, log: LOG };
const GIVEN = { ...OWN, own: false };

function contextOf(node: NodeKernel, warnings: unknown[] = []): ConfiguratorContext {
  const logger = { warn: (message: string, fields: unknown) => warnings.push({ message, fields }) };
  return { node, logger } as unknown as ConfiguratorContext;
}

describe('withIpv6Off', () => {
  it('turns the default off for the ADD alone and puts it back after', async () => {
    const { node, calls } = recordingNode();
    const seen: unknown[] = [];
    const answer = await withIpv6Off(contextOf(node), OWN, true, () => {
      seen.push(calls.length);
      return Promise.resolve('added');
    });
    expect(answer).toBe('added');
    expect(seen).toEqual([1]);
    expect(calls).toEqual([
      { sysctl: NAME, value: '1', netns: NETNS },
      { sysctl: NAME, value: '0', netns: NETNS },
    ]);
  });

  it('puts the default back when the ADD fails, and passes the failure on', async () => {
    const { node, calls } = recordingNode();
    await expect(
      withIpv6Off(contextOf(node), OWN, true, () => Promise.reject(new Error('ADD failed'))),
    ).rejects.toThrow('ADD failed');
    expect(calls.map((c) => ('value' in c ? c.value : c))).toEqual(['1', '0']);
  });

  it('changes nothing when not asked, and puts nothing back where nothing changed', async () => {
    const { node, calls } = recordingNode();
    await withIpv6Off(contextOf(node), OWN, false, () => Promise.resolve());
    expect(calls).toEqual([]);
    const values: (string | undefined)[] = ['1', undefined];
    const swaps: string[] = [];
    const fixed: NodeKernel = {
      ...node,
      swapSysctlIn: (_netns, _name, value) => {
        swaps.push(value);
        return Promise.resolve(values.shift());
      },
    };
    // Off for new interfaces already, then a kernel without IPv6: one swap each, none back.
    await withIpv6Off(contextOf(fixed), OWN, true, () => Promise.resolve());
    await withIpv6Off(contextOf(fixed), OWN, true, () => Promise.resolve());
    expect(swaps).toEqual(['1', '1']);
  });

  it('fails before the ADD when the default cannot be turned off', async () => {
    const { node } = recordingNode();
    const refusing: NodeKernel = {
      ...node,
      swapSysctlIn: () =>
        Promise.reject(
          new ConfiguratorError(`setting sysctl ${NAME}=1 failed`, { code: 'setup-failed' }),
        ),
    };
    let added = false;
    await expect(
      withIpv6Off(contextOf(refusing), OWN, true, () => {
        added = true;
        return Promise.resolve();
      }),
    ).rejects.toMatchObject({ code: 'setup-failed' });
    expect(added).toBe(false);
  });

  it('logs a default it could not put back, and answers the ADD’s result', async () => {
    const { node } = recordingNode();
    const answers = [() => Promise.resolve('0'), () => Promise.reject(new Error('namespace gone'))];
    const failingBack: NodeKernel = {
      ...node,
      swapSysctlIn: () => (answers.shift() as () => Promise<string>)(),
    };
    const warnings: unknown[] = [];
    const answer = await withIpv6Off(contextOf(failingBack, warnings), OWN, true, () =>
      Promise.resolve('added'),
    );
    expect(answer).toBe('added');
    expect(warnings).toEqual([
      {
        message: 'setting an IPv6 sysctl of the allocation’s namespace failed',
        fields: { ...LOG, netns: NETNS, sysctl: NAME, value: '0', error: 'namespace gone' },
      },
    ]);
  });

  it('turns the interface’s own IPv6 off after the ADD in a namespace that is not the runner’s', async () => {
    const { node, calls } = recordingNode();
    const seen: number[] = [];
    const answer = await withIpv6Off(contextOf(node), GIVEN, true, () => {
      seen.push(calls.length);
      return Promise.resolve('added');
    });
    expect(answer).toBe('added');
    expect(seen).toEqual([0]);
    expect(calls).toEqual([
      { sysctl: 'net/ipv6/conf/eth0/disable_ipv6', value: '1', netns: NETNS },
    ]);
    // A failed ADD made no interface: nothing is set.
    calls.length = 0;
    await expect(
      withIpv6Off(contextOf(node), GIVEN, true, () => Promise.reject(new Error('ADD failed'))),
    ).rejects.toThrow('ADD failed');
    expect(calls).toEqual([]);
  });

  it('logs an interface it could not turn off, and answers the ADD’s result', async () => {
    const { node } = recordingNode();
    const refusing: NodeKernel = {
      ...node,
      swapSysctlIn: () => Promise.reject(new Error('no eth0')),
    };
    const warnings: unknown[] = [];
    const answer = await withIpv6Off(contextOf(refusing, warnings), GIVEN, true, () =>
      Promise.resolve('added'),
    );
    expect(answer).toBe('added');
    expect(warnings).toEqual([
      {
        message: 'setting an IPv6 sysctl of the allocation’s namespace failed',
        fields: {
          ...LOG,
          netns: NETNS,
          sysctl: 'net/ipv6/conf/eth0/disable_ipv6',
          value: '1',
          error: 'no eth0',
        },
      },
    ]);
  });
});
