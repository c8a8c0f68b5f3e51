// @ts-check
// Shared jest settings: ts-jest in ESM mode (run jest with node --experimental-vm-modules).
// ts-jest only transpiles here (the tsconfig sets isolatedModules); each package's `lint` runs
// `tsc --noEmit` over src/, tests included, so test files are type-checked there.

/**
 * @param {{ roots?: string[], testMatch?: string[], testTimeout?: number }} [options]
 * @returns {import('jest').Config}
 */
export function jestConfig(options = {}) {
  return {
    testEnvironment: 'node',
    roots: options.roots ?? ['<rootDir>/src'],
    testMatch: options.testMatch ?? ['**/*.test.ts'],
    extensionsToTreatAsEsm: ['.ts'],
    moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
    transform: {
      '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.json' }],
    },
    testTimeout: options.testTimeout ?? 5000,
    // Every test prints what it ran; jest's own noise stays quiet.
    verbose: true,
  };
}
