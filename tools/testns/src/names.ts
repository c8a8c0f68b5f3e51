import { randomBytes } from 'node:crypto';

/** Every namespace a test makes starts with this, so a leak is easy to find and to remove. */
export const NAME_ROOT = 'ant';

const LABEL = /^[a-z0-9]{1,12}$/;
const PREFIX = /^ant-[a-z0-9]{1,16}$/;

/**
 * The prefix of this process's namespaces: `ALLOCNET_TESTNS_PREFIX` when the test command set it
 * (so it can find what a run leaked), else `ant-` and 8 random hex digits.
 */
export function runPrefix(env: NodeJS.ProcessEnv = process.env): string {
  const given = env.ALLOCNET_TESTNS_PREFIX;
  if (given === undefined || given === '') return `${NAME_ROOT}-${randomBytes(4).toString('hex')}`;
  if (!PREFIX.test(given)) {
    throw new Error(
      `ALLOCNET_TESTNS_PREFIX ${JSON.stringify(given)} is not "ant-" and 1-16 of [a-z0-9]`,
    );
  }
  return given;
}

/**
 * `<prefix>-<pid>-<lab>-<seq>-<label>`: unique across overlapping runs (the prefix), jest workers
 * of one run (the pid) and labs within a worker (the lab and sequence numbers).
 */
export function namespaceName(prefix: string, lab: number, seq: number, label: string): string {
  if (!LABEL.test(label)) throw new Error(`label ${JSON.stringify(label)} is not 1-12 of [a-z0-9]`);
  return `${prefix}-${process.pid.toString(36)}-${lab.toString(36)}-${seq.toString(36)}-${label}`;
}
