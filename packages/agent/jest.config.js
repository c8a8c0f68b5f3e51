import { jestConfig } from '../../jest.config.base.js';

// Its tests start and stop whole agents (gRPC server, LMDB, the background restore): 0.2–0.6 s
// each alone, up to ten times that when the test command runs every package's tests at once on
// a 2-core machine. `serves at once after a restart` took 5,440 ms in CI on 7959a54 and failed
// the shared 5 s limit, which is a guard against hangs here, not a goal.
export default jestConfig({ testTimeout: 30_000 });
