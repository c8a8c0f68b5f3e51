// What an `Iptables` reads without changing anything: a chain's or a table's rules (`-S`), whether
// a chain or a rule is there (`-S <chain> 1`, `-C`), and iptables-save parsed.
import type { CallOptions, Commands } from './commands.js';
import { createRuleMemo, parseRuleListing } from './save.js';
import type { Iptables } from './types.js';
import { checkChain, checkSpec } from './validate.js';
import type { Table } from './validate.js';

export type Listing = Pick<
  Iptables,
  'listRules' | 'listChains' | 'chainExists' | 'ruleExists' | 'save'
>;

export function listingOps(commands: Commands): Listing {
  // The same lines come back read after read (the shared chains): each is parsed once.
  const memo = createRuleMemo();

  async function listing(table: Table, chain: string | undefined, call: CallOptions | undefined) {
    const argv = [
      ...commands.tableArgs(table),
      '-S',
      ...(chain === undefined ? [] : [checkChain(chain)]),
    ];
    const stdout = await commands.run(argv, call);
    return commands.parsed(argv, () => parseRuleListing(table, stdout, memo));
  }

  /** A question iptables answers by its exit: 0 is yes, a `not-found` failure no. */
  async function answer(argv: readonly string[], call: CallOptions | undefined): Promise<boolean> {
    const { result, command } = await commands.execute(argv, call);
    if (result.kind === 'exited' && result.exitCode === 0) return true;
    const error = commands.failure(argv, command, result);
    if (error.code === 'not-found') return false;
    throw error;
  }

  return {
    async listRules(table, chain, call) {
      return (await listing(table, chain, call)).rules;
    },

    async listChains(table, call) {
      return (await listing(table, undefined, call)).chains;
    },

    chainExists(table, chain, call) {
      // `-S <chain> 1` prints at most one rule, so the answer costs the same for any chain size.
      return answer([...commands.tableArgs(table), '-S', checkChain(chain), '1'], call);
    },

    ruleExists(table, chain, spec, call) {
      return answer(
        [...commands.tableArgs(table), '-C', checkChain(chain), ...checkSpec(spec)],
        call,
      );
    },

    async save(call) {
      return (await commands.save(call)).tables;
    },
  };
}
