import { readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import ipaddr from 'ipaddr.js';
import type { FoundReservation } from './types.js';

/**
 * host-local keeps one file per reserved address in `<dataDir>/<network>/`, named by the address
 * and holding `<container id>\r\n<ifname>` (plugins 1.1.1; older ones wrote the id alone), beside
 * `lock` and `last_reserved_ip.<range>`.
 */
function ownerOf(text: string): string {
  return text.split(/\r?\n/, 1)[0]?.trim() ?? '';
}

function missing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT';
}

/** Every reservation in `dir` (a missing directory has none). */
export async function listReservations(network: string, dir: string): Promise<FoundReservation[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if (missing(error)) return [];
    throw error;
  }
  const found = await Promise.all(
    names.filter((n) => ipaddr.isValid(n)).map((n) => readReservation(network, dir, n)),
  );
  return found.filter((r): r is FoundReservation => r !== undefined);
}

/** The reservation of `address` in `dir`, if there is one. */
export async function readReservation(
  network: string,
  dir: string,
  address: string,
): Promise<FoundReservation | undefined> {
  const path = join(dir, address);
  try {
    return { network, address, path, allocId: ownerOf(await readFile(path, 'utf8')) };
  } catch (error) {
    // Released since the directory was read.
    if (missing(error)) return undefined;
    throw error;
  }
}

/**
 * Removes a reservation file if it still names `allocId`. No lock is taken: host-local only
 * creates new files (O_EXCL) or removes files of the id it releases, and the runner never runs two
 * operations of one allocation at once, so the file cannot change owner under us.
 */
export async function removeReservation(r: FoundReservation): Promise<boolean> {
  const now = await readReservation(r.network, join(r.path, '..'), r.address);
  if (now?.allocId !== r.allocId) return false;
  await rm(r.path, { force: true });
  return true;
}
