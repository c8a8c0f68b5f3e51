import { readFileSync, writeFileSync } from 'node:fs';
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ipaddr from 'ipaddr.js';
import { lockExclusive } from '@allocnet/libc';
import { namesInDir } from '@allocnet/base/files';
import type { FoundReservation } from './types.js';

/**
 * host-local keeps one file per reserved address in `<dataDir>/<network>/`, named by the address
 * and holding `<container id>\r\n<ifname>` (plugins 1.1.1; older ones wrote the id alone), beside
 * `lock` and `last_reserved_ip.<range>`.
 *
 * A hold (holds.ts) is a file of the same name that allocnet writes itself, holding
 * `<allocation id>\r\n<ifname>\r\nallocnet-hold`: its first line names the owner, so everything
 * that reads reservations (the leak finder, the teardown audit, the reconciler) sees it as the
 * allocation's; its text is not `<id>\r\n<ifname>`, so host-local's DEL (which releases files
 * whose trimmed text is exactly that) leaves it and its ADD without a request does not call it a
 * duplicate. host-local creates reservations O_EXCL and skips an existing file: a hold keeps the
 * address from everyone until allocnet removes it.
 */
function ownerOf(text: string): string {
  return text.split(/\r?\n/, 1)[0]?.trim() ?? '';
}

/** The last line of a hold's text. */
export const HOLD_MARK = 'allocnet-hold';

/** A hold's text for `allocId`'s interface `ifName`. */
export function holdText(allocId: string, ifName: string): string {
  return `${allocId}\r\n${ifName}\r\n${HOLD_MARK}`;
}

function isHoldText(text: string): boolean {
  return text.split(/\r?\n/)[2]?.trim() === HOLD_MARK;
}

function missing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT';
}

/** Every reservation in `dir` (a missing directory has none). */
export async function listReservations(network: string, dir: string): Promise<FoundReservation[]> {
  const names = await namesInDir(dir);
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
    const text = await readFile(path, 'utf8');
    return { network, address, path, allocId: ownerOf(text), hold: isHoldText(text) };
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

/** `readReservation` without the event loop (`writeHold`). */
function readReservationSync(
  network: string,
  dir: string,
  address: string,
): FoundReservation | undefined {
  const path = join(dir, address);
  try {
    const text = readFileSync(path, 'utf8');
    return { network, address, path, allocId: ownerOf(text), hold: isHoldText(text) };
  } catch (error) {
    if (missing(error)) return undefined;
    throw error;
  }
}

/**
 * Writes a hold for `address` in `dir` (which must exist) unless a file is there (O_EXCL, as
 * host-local creates its own): undefined when written, else the reservation found there.
 * Synchronous, and the file read first: at a start every recorded address is held this way, and
 * after a restart (not a reboot) each is still reserved; a thousand reads through promises, and a
 * thousand EEXIST errors, took ~5× as long as these (measured: 160-245 ms against 23-51 ms).
 */
export function writeHold(
  network: string,
  dir: string,
  address: string,
  owner: { readonly allocId: string; readonly ifName: string },
): FoundReservation | undefined {
  for (;;) {
    const found = readReservationSync(network, dir, address);
    if (found !== undefined) return found;
    try {
      writeFileSync(join(dir, address), holdText(owner.allocId, owner.ifName), {
        flag: 'wx',
        mode: 0o644,
      });
      return undefined;
    } catch (error) {
      // Reserved since the read (host-local's ADD, which never removes a file it did not make):
      // read it.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}

/**
 * Turns `r`, the allocation's own reservation (`<id>\r\n<ifname>`), into a hold, in place: a
 * DEL then leaves it. No lock: only the owner's DEL would remove it, and the runner never runs
 * two operations on one allocation at once; a concurrent DEL of another id reads either text as
 * not its own.
 */
export async function turnIntoHold(r: FoundReservation, ifName: string): Promise<void> {
  await writeFile(r.path, holdText(r.allocId, ifName));
}

/** The size of `path`, or undefined when it is gone. */
async function sizeOf(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch (error) {
    if (missing(error)) return undefined;
    throw error;
  }
}

/** How long a sweep of empty reservations waits for host-local's lock. */
const IPAM_LOCK_TIMEOUT_MS = 10_000;

/**
 * Removes the reservation files in `dir` that are empty, and returns their addresses. host-local
 * creates a reservation O_EXCL and then writes its owner into it, both under its flock on
 * `<dir>/lock`; a host-local killed between the two (a setup cancelled in the middle of its ADD)
 * leaves an empty file that reserves the address for no one, for ever (no DEL names it, and a
 * leak search cannot tell whose it is). Under the same flock no host-local is between the two,
 * so a file still empty there is such a leftover.
 */
export async function removeEmptyReservations(dir: string): Promise<string[]> {
  const names = await namesInDir(dir);
  const addresses = names.filter((n) => ipaddr.isValid(n));
  const sizes = await Promise.all(addresses.map((a) => sizeOf(join(dir, a))));
  const empty = addresses.filter((_, i) => sizes[i] === 0);
  if (empty.length === 0) return [];
  const lock = await lockExclusive(join(dir, 'lock'), IPAM_LOCK_TIMEOUT_MS);
  try {
    const removed: string[] = [];
    for (const address of empty) {
      const path = join(dir, address);
      if ((await sizeOf(path)) !== 0) continue;
      await rm(path, { force: true });
      removed.push(address);
    }
    return removed;
  } finally {
    lock.release();
  }
}
