// The one logger interface of allocnet (@allocnet/base), re-exported for this package's users.
export { silentLogger } from '@allocnet/base';
export type { Logger } from '@allocnet/base';
