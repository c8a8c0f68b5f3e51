// What the gRPC door checks of a request's networks before the runner records anything: each
// attachment's own ports (two on one host port), and that every network it names is known.
import { invalidInputOf, moveProblemFields } from '@allocnet/base';
import type { FieldPath } from '@allocnet/base';
import type { AttachmentSpec } from '@allocnet/alloc-runner';
import { portMappings } from '@allocnet/cni-configurator';
import type { AllocNetworkSpec, NetworkCatalog } from '@allocnet/cni-configurator';
import { invalidRequest } from './errors.js';
import { protoField } from './status.js';

/**
 * Two ports of one attachment on one host port: the configurator would find it only after the
 * intent and the namespace exist (a ConfiguratorError naming `ports[1].value`, here under
 * `prefix`). Ports on two attachments are the runner's to refuse.
 */
export function checkOwnPorts(
  prefix: FieldPath,
  spec: AllocNetworkSpec,
  attachment: AttachmentSpec,
  ignoreHostIps: boolean,
): void {
  try {
    portMappings({ ...spec, ports: attachment.ports ?? [] }, ignoreHostIps);
  } catch (error) {
    const bad = invalidInputOf(error);
    if (bad === undefined) throw error;
    throw invalidRequest(
      [...prefix, ...bad.path],
      moveProblemFields(bad.problem, (field) => [...prefix, ...field]),
      protoField,
      error,
    );
  }
}

/**
 * Refuses a network the configurator does not know, naming the field at `paths` (its conf dir is
 * read again first: a network just added may not be in the catalog yet).
 */
export async function checkNetworksKnown(
  wanted: readonly { readonly path: FieldPath; readonly network: string | undefined }[],
  context: {
    readonly catalog: () => NetworkCatalog;
    readonly reload: () => Promise<NetworkCatalog>;
  },
): Promise<void> {
  const named = wanted.filter(
    (w): w is { path: FieldPath; network: string } => w.network !== undefined && w.network !== '',
  );
  if (named.length === 0) return;
  const unknownIn = (catalog: NetworkCatalog) =>
    named.find((w) => !catalog.networks.some((n) => n.name === w.network));
  let catalog = context.catalog();
  if (unknownIn(catalog) !== undefined) catalog = await context.reload();
  const unknown = unknownIn(catalog);
  if (unknown === undefined) return;
  throw invalidRequest(
    unknown.path,
    [
      `${JSON.stringify(unknown.network)} is not known (networks: ${catalog.networks.map((n) => JSON.stringify(n.name)).join(', ')})`,
    ],
    protoField,
  );
}
