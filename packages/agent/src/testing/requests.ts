// Requests as grpc-js gives them to the handlers (every field there, with the proto's defaults),
// and the catalog of a node with a second network: what the agent's tests of the gRPC door build
// their cases from (requests.test.ts, requests-attachments.test.ts, alloc-handlers.test.ts).
import type { NetworkCatalog } from '@allocnet/cni-configurator';
import type { NetworkAttachment__Output, SetupAllocNetworkRequest__Output } from '@allocnet/proto';

/** The default network `nomad` and a macvlan network `storage`. */
export const STORAGE_CATALOG: NetworkCatalog = {
  networks: [
    { name: 'nomad', source: 'default', plugins: ['bridge'] },
    { name: 'storage', source: '/etc/cni/net.d/30-storage.conflist', plugins: ['macvlan'] },
  ],
  invalid: [],
};

/** A SetupAllocNetworkRequest of allocation `a1` (job `web`, group `api`), with `extra` on top. */
export function setupRequestOf(
  extra: Partial<SetupAllocNetworkRequest__Output> = {},
): SetupAllocNetworkRequest__Output {
  return {
    allocId: 'a1',
    region: '',
    namespace: 'default',
    jobId: 'web',
    groupName: 'api',
    network: '',
    ports: [],
    networks: [],
    cniArgs: {},
    netnsPath: '',
    attachments: [],
    ...extra,
  };
}

/** A NetworkAttachment with every field at its default, `extra` on top. */
export function networkAttachmentOf(
  extra: Partial<NetworkAttachment__Output> = {},
): NetworkAttachment__Output {
  return {
    network: '',
    interfaceName: '',
    ports: [],
    cniArgs: {},
    ips: [],
    mac: '',
    defaultRoute: false,
    ...extra,
  };
}
