// @ts-check
// `pnpm lint:root` fails on an import cycle between modules of any package's src, type-only
// imports included: a type import is a dependency of the design even though the compiler drops
// it (the agent's command.ts ↔ dev.ts circle had one). Cycles between packages fail earlier:
// turbo refuses a cyclic workspace graph.
/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-import-cycle',
      comment:
        'Modules that import each other, directly or through others: move what both need into a module both import, or pass it in.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    includeOnly: '^(packages|tools)/[^/]+/src/|^integration/src/',
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '/src/gen/' },
    // Type-only imports and re-exports count.
    tsPreCompilationDeps: true,
    // NodeNext resolution: `./x.js` in an import is `./x.ts` on disk.
    tsConfig: { fileName: 'tsconfig.base.json' },
  },
};
