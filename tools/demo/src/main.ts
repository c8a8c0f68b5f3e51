#!/usr/bin/env node
// The main job until the agent exists: in a throwaway namespace standing for a node, write what
// the bridge plugin leaves for two allocations, find one allocation's rules by their comment in
// iptables-save, remove them in one atomic iptables-restore, and show what is left. Nothing runs
// in the root namespace; the namespace is removed at the end, also on failure.
import { createBatch, createIptables, displayArgs } from '@allocnet/iptables-node';
import type { Rule } from '@allocnet/iptables-node';
import {
  addBridgeMasquerade,
  bridgeChainName,
  bridgeComment,
} from '@allocnet/iptables-node/testing';
import { createNetnsLab } from '@allocnet/testns';

const NETWORK = 'nomad';
const ALLOCS = [
  { id: '6b235529-8111-4bbe-520b-d639b1d2a94e', ip: '172.26.64.2' },
  { id: '0c8f3ce0-2b5d-4c7e-9a0e-3f1d2c4b5a69', ip: '172.26.64.3' },
];

function show(rule: Rule): string {
  return `  ${rule.table}/${rule.chain}: ${displayArgs(rule.spec)}`;
}

async function main(): Promise<void> {
  const lab = createNetnsLab();
  // The namespace must go whatever happens: on Ctrl-C, on SIGTERM, and when a reader such as
  // `head` closes stdout early (EPIPE would otherwise end the process before \`finally\`).
  const stop = (signal: NodeJS.Signals) => {
    void lab.dispose().finally(() => process.exit(128 + (signal === 'SIGINT' ? 2 : 15)));
  };
  process.once('SIGINT', stop).once('SIGTERM', stop);
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
  });
  try {
    const node = await lab.node('demo');
    console.log(`1. made namespace ${node.name}, standing for a node`);
    const ipt = createIptables({ netns: node.path });

    const setup = createBatch();
    for (const alloc of ALLOCS) addBridgeMasquerade(setup, { network: NETWORK, ...alloc });
    await ipt.restore(setup);
    console.log(`2. wrote the bridge plugin's masquerade rules for ${ALLOCS.length} allocations`);

    const [target] = ALLOCS;
    if (target === undefined) throw new Error('no allocation');
    const tagged = (await ipt.save({ table: 'nat' }))
      .flatMap((t) => t.rules)
      .filter((r) => r.comment === bridgeComment(NETWORK, target.id));
    console.log(
      `3. iptables-save shows ${tagged.length} rules tagged with allocation ${target.id}:`,
    );
    for (const rule of tagged) console.log(show(rule));

    const chain = bridgeChainName(NETWORK, target.id);
    const cleanup = createBatch();
    for (const rule of tagged.filter((r) => r.chain !== chain)) cleanup.deleteRule(rule);
    cleanup.clearChain('nat', chain).deleteChain('nat', chain);
    await ipt.restore(cleanup);
    console.log(
      `4. removed them and chain ${chain} with one iptables-restore (${cleanup.size} changes)`,
    );

    const left = (await ipt.save({ table: 'nat' })).flatMap((t) => t.rules);
    console.log(`5. the nat table now holds ${left.length} rules, all of the other allocation:`);
    for (const rule of left) console.log(show(rule));
    if (left.some((r) => r.comment === bridgeComment(NETWORK, target.id)))
      throw new Error('a tagged rule is still there');
  } finally {
    await lab.dispose();
  }
  console.log('6. removed the namespace; the root namespace was never touched');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
