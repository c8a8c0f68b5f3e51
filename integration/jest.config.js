import { jestConfig } from '../jest.config.base.js';

// Real processes in real namespaces: slower than unit tests, so a longer timeout per test.
export default jestConfig({ testTimeout: 120_000 });
