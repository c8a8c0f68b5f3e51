// The agent's own codec; the generic ones (`failWith`, `list`, `section`, …) are @allocnet/cni's,
// and what a clean absolute path is, @allocnet/netns's.
import { absolutePathProblem, tidyPath } from '@allocnet/netns';
import { failWith, problem } from '@allocnet/cni';
import { show } from './errors.js';

/** A clean absolute path, tidied (`/var//lib/x/` → `/var/lib/x`). */
export const AbsolutePath = failWith('AbsolutePath', (u) => {
  if (typeof u !== 'string') return problem(`should be a path, got ${show(u)}`);
  const why = absolutePathProblem(u);
  return why === undefined ? tidyPath(u) : problem(`${show(u)} ${why}`);
});
