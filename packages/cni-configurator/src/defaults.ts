// The configurator's defaults that programs show before they load it (the CLI's help, the
// agent's DEFAULTS): a module of constants, importing nothing (`@allocnet/cni-configurator/defaults`).

/** Where the default network's host-local IPAM keeps its reservations. */
export const DEFAULT_IPAM_DATA_DIR = '/var/run/cni';
