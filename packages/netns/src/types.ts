// What the manager is, apart from how it is made: the modules that build it and the facade
// (manager.ts) share these.

export interface CallOptions {
  readonly signal?: AbortSignal;
}

/** Named namespaces: what the allocation runner makes and removes. */
export interface NetnsManager {
  /**
   * Makes the named namespace and returns its path; fails if it already exists. An abort is not
   * passed to `ip netns add` (killed half-way it leaves a file that is not a namespace): one that
   * comes during it removes the namespace again, then the call is `aborted`.
   */
  create(name: string, options?: CallOptions): Promise<string>;
  /**
   * Removes the named namespace (also a leftover file that is no longer one); true when there was
   * something to remove, false when it was not there.
   */
  remove(name: string, options?: CallOptions): Promise<boolean>;
  /** Whether `path` is a network namespace (a mounted nsfs file), not just a file. */
  exists(path: string): Promise<boolean>;
  /** The names of the namespaces under the run directory. */
  list(options?: CallOptions): Promise<string[]>;
  /** The path a namespace of that name has. */
  pathOf(name: string): string;
}

/** The manager `createIpNetnsManager` makes: `NetnsManager` and what a sandbox or test lab needs. */
export interface IpNetnsManager extends NetnsManager {
  /**
   * Makes a namespace standing for a node (a host): `lo` up and IPv4 forwarding on (IPv6 too
   * with `ipv6Forwarding`). Returns its path. When a step after `create` fails the namespace is
   * left for the caller to remove, as it removes its others.
   */
  createNode(
    name: string,
    options?: CallOptions & { readonly ipv6Forwarding?: boolean },
  ): Promise<string>;
  /** The processes running in the namespace (`ip netns pids`). */
  pids(name: string, options?: CallOptions): Promise<number[]>;
  /**
   * SIGKILLs every process in the namespace (they would keep it alive after `remove`). A process
   * that exited meanwhile is no error; another failure is thrown (`kill-failed`) once all were
   * tried. Resolves how many were signalled.
   */
  killAll(name: string, options?: CallOptions): Promise<number>;
  /** The links inside, `lo` included. */
  links(name: string, options?: CallOptions): Promise<string[]>;
  /** Deletes a link inside (a veth's peer goes with it); false when it was not there. */
  deleteLink(name: string, link: string, options?: CallOptions): Promise<boolean>;
  /**
   * Deletes every default route (IPv4 and IPv6, main table) through `link` inside the namespace
   * at `path` (any namespace file: `/run/netns/<name>`, a runtime's `/proc/<pid>/ns/net`): what a
   * secondary network's plugins added that the allocation is not to route by. None is no error.
   */
  deleteDefaultRoutes(path: string, link: string, options?: CallOptions): Promise<void>;
}
