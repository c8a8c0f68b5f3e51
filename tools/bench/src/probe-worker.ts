// The reap-agent scenario's probe, on a thread of its own (suite-reap-agent.ts starts it): a
// client asking the agent, one call at a time every `everyMs`, ListAllocNetworks,
// GetAllocNetwork and grpc.health.v1 Health/Check in turn, until the parent says `stop`; then it
// posts each call's latency in ms. On its own thread, the probe's timings are the agent's alone:
// the parent decoding a summary of thousands of reaped allocations holds the parent's event loop,
// not this one (in one thread, that decode counted as the agent's stall).
import { setTimeout as sleep } from 'node:timers/promises';
import { parentPort, workerData } from 'node:worker_threads';
import * as grpc from '@grpc/grpc-js';
import { agentTarget, createAllocNetworkClient, unary } from '@allocnet/proto';

interface ProbeData {
  readonly socket: string;
  readonly allocId: string;
  readonly everyMs: number;
}

const { socket, allocId, everyMs } = workerData as ProbeData;
const own = { 'grpc.use_local_subchannel_pool': 1 };
const alloc = createAllocNetworkClient(agentTarget(socket), grpc.credentials.createInsecure(), own);
const health = new grpc.Client(agentTarget(socket), grpc.credentials.createInsecure(), own);
const identity = (b: Buffer) => b;
const check = () =>
  new Promise<void>((resolve, reject) => {
    health.makeUnaryRequest(
      '/grpc.health.v1.Health/Check',
      identity,
      identity,
      Buffer.alloc(0),
      { deadline: Date.now() + 60_000 },
      (error) => {
        if (error === null) resolve();
        else reject(error);
      },
    );
  });
const asks: readonly (() => Promise<unknown>)[] = [
  () => unary(alloc, 'ListAllocNetworks', {}, { deadlineMs: 60_000 }),
  () => unary(alloc, 'GetAllocNetwork', { allocId }, { deadlineMs: 60_000 }),
  check,
];

const stopping = new AbortController();
parentPort?.once('message', () => {
  stopping.abort();
});
const samples: number[] = [];
for (let k = 0; !stopping.signal.aborted; k++) {
  const t0 = performance.now();
  await (asks[k % asks.length] as () => Promise<unknown>)();
  const ms = performance.now() - t0;
  samples.push(ms);
  await sleep(Math.max(0, everyMs - ms));
}
alloc.close();
health.close();
parentPort?.postMessage(samples);
