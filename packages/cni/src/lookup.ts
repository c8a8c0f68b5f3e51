import { statSync } from 'node:fs';
import { join } from 'node:path';
import { CniError } from './errors.js';

/**
 * The path of plugin `type`: the first directory, in order, holding a regular file of that name
 * (a symlink to one counts). Throws `plugin-not-found` listing the directories searched.
 * Synchronous: a few stat calls cost microseconds, a trip through the thread pool more.
 */
export function findPlugin(type: string, dirs: readonly string[]): string {
  if (type === '' || type.includes('/') || type === '.' || type === '..') {
    const msg = `plugin type ${JSON.stringify(type)} is not a file name`;
    throw new CniError(msg, { code: 'invalid-config', specCode: 7, msg, plugin: type });
  }
  for (const dir of dirs) {
    const path = join(dir, type);
    try {
      if (statSync(path).isFile()) return path;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // Not in this directory (or the directory is missing): try the next one.
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
    }
  }
  const msg = `plugin ${JSON.stringify(type)} not found in ${dirs.length === 0 ? 'no directories' : dirs.map((d) => JSON.stringify(d)).join(', ')}`;
  throw new CniError(msg, { code: 'plugin-not-found', msg, plugin: type });
}
