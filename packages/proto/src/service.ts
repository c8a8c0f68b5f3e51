// The contract's services as `@allocnet/proto/call` names them: a full name, typed by the
// service's generated client, so a call's method, request and answer are typed (call.ts, view.ts).
import { ALLOC_NETWORK_SERVICE, OPERATOR_SERVICE } from './contract.mjs';
import type { AllocNetworkServiceClient } from './gen/allocnet/v1/AllocNetworkService.js';
import type { OperatorServiceClient } from './gen/allocnet/v1/OperatorService.js';

/** A service of the contract, typed by its generated client `C` (which is never made). */
export interface Service<C> {
  readonly fullName: string;
  /** Only for the type. */
  readonly client?: C;
}

/** The scheduler's service. */
export const ALLOC_NETWORK: Service<AllocNetworkServiceClient> = Object.freeze({
  fullName: ALLOC_NETWORK_SERVICE,
});
/** The operators' service. */
export const OPERATOR: Service<OperatorServiceClient> = Object.freeze({
  fullName: OPERATOR_SERVICE,
});
