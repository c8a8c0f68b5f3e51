// The rule and chain commands of an `Iptables`, one iptables process each: `-A`, `-I`, `-D`,
// `-N`, `-F`, `-X`. Arguments are checked before anything runs.
import type { Commands } from './commands.js';
import type { Iptables } from './types.js';
import { checkChain, checkPosition, checkSpec } from './validate.js';

export type Changes = Pick<
  Iptables,
  'append' | 'insert' | 'delete' | 'newChain' | 'clearChain' | 'deleteChain'
>;

export function changeOps(commands: Commands): Changes {
  const { tableArgs } = commands;
  return {
    async append(table, chain, spec, call) {
      await commands.run([...tableArgs(table), '-A', checkChain(chain), ...checkSpec(spec)], call);
    },

    async insert(table, chain, spec, call) {
      const position = call?.position === undefined ? [] : [String(checkPosition(call.position))];
      await commands.run(
        [...tableArgs(table), '-I', checkChain(chain), ...position, ...checkSpec(spec)],
        call,
      );
    },

    async delete(table, chain, spec, call) {
      await commands.run([...tableArgs(table), '-D', checkChain(chain), ...checkSpec(spec)], call);
    },

    async newChain(table, chain, call) {
      await commands.run([...tableArgs(table), '-N', checkChain(chain)], call);
    },

    async clearChain(table, chain, call) {
      await commands.run([...tableArgs(table), '-F', checkChain(chain)], call);
    },

    async deleteChain(table, chain, call) {
      await commands.run([...tableArgs(table), '-X', checkChain(chain)], call);
    },
  };
}
