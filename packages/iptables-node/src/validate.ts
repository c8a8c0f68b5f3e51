import { resolveNetns } from '@allocnet/netns';
import { IptablesError } from './errors.js';

/** The tables iptables knows. */
export type Table = 'filter' | 'nat' | 'mangle' | 'raw' | 'security';
export const TABLES: readonly Table[] = ['filter', 'nat', 'mangle', 'raw', 'security'];

export type Family = 'ipv4' | 'ipv6';

function invalid(message: string): IptablesError {
  return new IptablesError(message, { code: 'invalid-argument' });
}

export function checkTable(table: string, field = 'table'): Table {
  if (!(TABLES as readonly string[]).includes(table)) {
    throw invalid(`${field} ${JSON.stringify(table)} is not one of ${TABLES.join(', ')}`);
  }
  return table as Table;
}

// iptables keeps chain names to 28 characters (XT_EXTENSION_MAXNAMELEN - 1). A name starting with
// "-" or "!" would read as an option; whitespace and quotes would split the restore line.
const CHAIN = /^[^\s"'!-][^\s"']{0,27}$/;

export function checkChain(chain: string, field = 'chain'): string {
  if (!CHAIN.test(chain)) {
    throw invalid(
      `${field} ${JSON.stringify(chain)} is not a chain name (1-28 characters, no whitespace or quotes, not starting with "-" or "!")`,
    );
  }
  return chain;
}

export function checkSpec(spec: readonly string[], field = 'spec'): readonly string[] {
  if (spec.length === 0) throw invalid(`${field} is empty`);
  spec.forEach((arg, i) => {
    if (arg.includes('\0')) throw invalid(`${field}[${i}] holds a NUL character`);
    // A table switch inside a rule would act on another table than the one named.
    if (arg === '-t' || arg === '--table')
      throw invalid(`${field}[${i}] is ${arg}; pass the table separately`);
  });
  return spec;
}

export function checkPosition(position: number, field = 'position'): number {
  if (!Number.isSafeInteger(position) || position < 1) {
    throw invalid(`${field} ${position} is not a rule number (1 or more)`);
  }
  return position;
}

/**
 * The path of a netns given by path (used as is) or by name (under @allocnet/netns's
 * NETNS_RUN_DIR): @allocnet/netns's rule for both, worded here as `invalid-argument` on `field`.
 */
export function netnsPath(netns: string, field = 'netns'): string {
  const resolved = resolveNetns(netns);
  if ('problem' in resolved) throw invalid(`${field} ${JSON.stringify(netns)} ${resolved.problem}`);
  return resolved.path;
}
