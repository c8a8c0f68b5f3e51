// Original file: ../../proto/allocnet/v1/types.proto

/**
 * One address an IPAM plugin (host-local) holds for an allocation.
 */
export interface Reservation {
  /**
   * The CNI network the address belongs to.
   */
  network?: string;
  /**
   * The reserved address, without a prefix length.
   */
  address?: string;
  /**
   * The reservation file, e.g. `/var/run/cni/nomad/172.26.64.5`.
   */
  path?: string;
  /**
   * The allocation that holds the address.
   */
  allocId?: string;
}

/**
 * One address an IPAM plugin (host-local) holds for an allocation.
 */
export interface Reservation__Output {
  /**
   * The CNI network the address belongs to.
   */
  network: string;
  /**
   * The reserved address, without a prefix length.
   */
  address: string;
  /**
   * The reservation file, e.g. `/var/run/cni/nomad/172.26.64.5`.
   */
  path: string;
  /**
   * The allocation that holds the address.
   */
  allocId: string;
}
