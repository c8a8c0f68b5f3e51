// What the composition root gives the CNI door, as narrow interfaces: the door never imports the
// agent (the agent depends on it). The agent's winston logger, its opened-parts list and its safe
// unix-socket binder (the one the gRPC door uses too) fit them as they are.
import type { Logger } from '@allocnet/base';

/** The four levels the door logs at; a winston logger fits. */
export type CniLogger = Required<Logger>;

/** Where a start registers each part it opened, with how to close it (newest first on failure). */
export interface OpenedParts {
  push(what: string, close: () => Promise<void>): void;
}

/** A bound unix socket: `release` removes its file if it is still the one bound. */
export interface BoundSocket {
  readonly path: string;
  release(): Promise<void>;
}

/**
 * Binds the unix socket at `path`, calling `listen` with the address to listen on (a temporary
 * name it then renames into place, or `path` itself), and sets its and its directory's modes.
 */
export type SocketBinder = (
  path: string,
  listen: (address: string) => Promise<void>,
) => Promise<BoundSocket>;
