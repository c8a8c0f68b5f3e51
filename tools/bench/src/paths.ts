// Where the benchmarks find the repository's built programs.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
/** The repository's root (this file is tools/bench/dist/paths.js once built). */
export const REPO = resolve(here, '..', '..', '..');
/** This package's built scripts. */
export const DIST = here;
/** The agent, built. */
export const AGENT_MAIN = join(REPO, 'packages', 'agent', 'dist', 'main.js');
/** The CLI, built: what the `allocnet` command runs. */
export const CLI_MAIN = join(REPO, 'packages', 'cli', 'dist', 'main.cjs');
/** Where every benchmark writes its JSON by default. */
export const RESULTS = join(REPO, 'tools', 'bench', 'results');
