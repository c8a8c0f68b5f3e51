// Several networks per allocation at the gRPC door: NetworkAttachment as the runner's
// AttachmentSpec, and the AttachNetwork and DetachNetwork requests. The runner's own checks of a
// spec's attachments (interfaces, networks, default routes, ports across attachments, the count)
// are the runner's decoder's; here, what the agent decides before it.
import * as grpc from '@grpc/grpc-js';
import type { NetworkCatalog } from '@allocnet/cni-configurator';
import type { AttachNetworkRequest__Output, NetworkAttachment__Output } from '@allocnet/proto';
import {
  attachmentSpecOf,
  decodeAttachRequest,
  decodeDetachRequest,
  decodeSetupRequest,
} from './requests.js';
import type { SetupContext } from './requests.js';
import { grpcFailure } from './status.js';
import { STORAGE_CATALOG, networkAttachmentOf, setupRequestOf } from './testing/requests.js';

const catalog = STORAGE_CATALOG;

function contextWith(after: NetworkCatalog = catalog) {
  let reloads = 0;
  const context: SetupContext = {
    catalog: () => catalog,
    reload: () => {
      reloads++;
      return Promise.resolve(after);
    },
    ignoreHostIps: false,
    limits: { maxPorts: 2, maxCniArgs: 1, maxAttachments: 8 },
  };
  return { context, reloads: () => reloads };
}

/** A NetworkAttachment as grpc-js gives it: every field there, with the proto defaults. */
const attachment = networkAttachmentOf;

function attach(extra: Partial<NetworkAttachment__Output> = {}): AttachNetworkRequest__Output {
  return { allocId: 'a1', attachment: attachment(extra) };
}

/** What a client sees for a request the decoder refuses: the status, its details, metadata. */
async function refused(decoding: Promise<unknown>) {
  try {
    await decoding;
  } catch (error) {
    return grpcFailure(error, undefined);
  }
  throw new Error('the request was accepted');
}

function invalid(field: string, details: string) {
  return {
    code: grpc.status.INVALID_ARGUMENT,
    details,
    metadata: { 'allocnet-error': 'invalid-request', 'allocnet-field': field },
  };
}

const port = (label: string, value: number, to = 0, hostIp = '') => ({ label, value, to, hostIp });

describe('attachmentSpecOf', () => {
  it('reads the proto defaults as "not set", so that the runner\'s defaults apply', () => {
    expect(attachmentSpecOf(attachment())).toEqual({});
  });

  it('keeps what is set', () => {
    expect(
      attachmentSpecOf(
        attachment({
          network: 'storage',
          interfaceName: 'net1',
          ports: [port('nfs', 2049, 0, '10.0.0.1'), port('x', 9000, 90)],
          cniArgs: { Rack: 'r1' },
          ips: ['10.9.0.5/24', 'fd00::5'],
          mac: '0a:58:0a:09:00:05',
          defaultRoute: true,
        }),
      ),
    ).toEqual({
      network: 'storage',
      ifName: 'net1',
      ports: [
        { label: 'nfs', value: 2049, hostIp: '10.0.0.1' },
        { label: 'x', value: 9000, to: 90 },
      ],
      cniArgs: { Rack: 'r1' },
      ips: ['10.9.0.5/24', 'fd00::5'],
      mac: '0a:58:0a:09:00:05',
      defaultRoute: true,
    });
  });
});

describe("SetupAllocNetwork's attachments", () => {
  it("gives the runner every attachment, then checks each one's own ports and network", async () => {
    const { context, reloads } = contextWith();
    const spec = await decodeSetupRequest(
      setup([
        attachment({ ports: [port('http', 8080)] }),
        attachment({ network: 'storage', interfaceName: 'net1', ips: ['10.9.0.7/24'] }),
      ]),
      context,
    );
    expect(spec.attachments).toEqual([
      { ports: [{ label: 'http', value: 8080 }] },
      { network: 'storage', ifName: 'net1', ips: ['10.9.0.7/24'] },
    ]);
    expect(reloads()).toBe(0);
    expect(
      (
        await refused(
          decodeSetupRequest(
            setup([
              attachment(),
              attachment({ network: 'storage', ports: [port('a', 80), port('b', 80)] }),
            ]),
            context,
          ),
        )
      ).details,
    ).toBe(
      'attachments[1].ports[1].value ("b") claims host port 80, which attachments[1].ports[0].value ("a") already claims',
    );
    expect(
      await refused(
        decodeSetupRequest(setup([attachment(), attachment({ network: 'vlan10' })]), context),
      ),
    ).toEqual(
      invalid(
        'attachments[1].network',
        'attachments[1].network "vlan10" is not known (networks: "nomad", "storage")',
      ),
    );
    expect(reloads()).toBe(1);
  });

  const setup = (attachments: unknown[]) =>
    setupRequestOf({ attachments: attachments as NetworkAttachment__Output[] });

  it('refuses an attachment of the wrong shape, naming it as the .proto does', async () => {
    const { context } = contextWith();
    expect(
      await refused(
        decodeSetupRequest(setup([attachment(), { ...attachment(), interfaceName: 7 }]), context),
      ),
    ).toEqual(
      invalid(
        'attachments[1].interface_name',
        'attachments[1].interface_name should be a string, got 7',
      ),
    );
    expect(
      await refused(
        decodeSetupRequest(
          setup([attachment({ ips: ['10.0.0.1', 5 as unknown as string] })]),
          context,
        ),
      ),
    ).toEqual(invalid('attachments[0].ips[1]', 'attachments[0].ips[1] should be a string, got 5'));
    expect(
      await refused(
        decodeSetupRequest(setup(Array.from({ length: 65 }, () => attachment())), context),
      ),
    ).toEqual(invalid('attachments', 'attachments has 65 attachments; at most 64'));
  });
});

describe('decodeAttachRequest', () => {
  it('gives the allocation and its AttachmentSpec', async () => {
    const { context, reloads } = contextWith();
    expect(
      await decodeAttachRequest(
        attach({ network: 'storage', ports: [port('nfs', 2049)], ips: ['10.9.0.5'] }),
        context,
      ),
    ).toEqual({
      allocId: 'a1',
      attachment: { network: 'storage', ports: [{ label: 'nfs', value: 2049 }], ips: ['10.9.0.5'] },
    });
    expect(await decodeAttachRequest(attach(), context)).toEqual({ allocId: 'a1', attachment: {} });
    expect(reloads()).toBe(0);
  });

  it('refuses a request without an attachment, or with a bad id', async () => {
    const { context } = contextWith();
    expect(
      await refused(decodeAttachRequest({ allocId: 'a1', attachment: null }, context)),
    ).toEqual(invalid('attachment', 'attachment is missing'));
    expect(
      (await refused(decodeAttachRequest({ ...attach(), allocId: '' }, context))).details,
    ).toBe('alloc_id is empty');
  });

  it('names a bad field under `attachment`', async () => {
    const { context } = contextWith();
    expect(
      await refused(
        decodeAttachRequest(
          {
            allocId: 'a1',
            attachment: { ...attachment(), mac: 7 },
          } as unknown as AttachNetworkRequest__Output,
          context,
        ),
      ),
    ).toEqual(invalid('attachment.mac', 'attachment.mac should be a string, got 7'));
  });

  it('refuses two of its ports on one host port, naming both under `attachment`', async () => {
    const { context } = contextWith();
    const failure = await refused(
      decodeAttachRequest(attach({ ports: [port('a', 80), port('b', 80)] }), context),
    );
    expect(failure).toEqual({
      code: grpc.status.INVALID_ARGUMENT,
      details:
        'attachment.ports[1].value ("b") claims host port 80, which attachment.ports[0].value ("a") already claims',
      metadata: {
        'allocnet-error': 'invalid-argument',
        'allocnet-field': 'attachment.ports[1].value',
      },
    });
  });

  it("applies the agent's limits on ports and CNI args to the attachment", async () => {
    const { context } = contextWith();
    expect(
      await refused(
        decodeAttachRequest(attach({ ports: [port('a', 1), port('b', 2), port('c', 3)] }), context),
      ),
    ).toEqual(
      invalid(
        'attachment.ports',
        "attachment.ports has 3 entries, more than the agent's limit of 2 (limits.maxPorts)",
      ),
    );
    expect(
      await refused(decodeAttachRequest(attach({ cniArgs: { a: '1', b: '2' } }), context)),
    ).toEqual(
      invalid(
        'attachment.cni_args',
        "attachment.cni_args has 2 entries, more than the agent's limit of 1 (limits.maxCniArgs)",
      ),
    );
  });

  it('reads the conf dir again for a network it does not know, then refuses it naming the field', async () => {
    const added: NetworkCatalog = {
      ...catalog,
      networks: [
        ...catalog.networks,
        { name: 'vlan10', source: '/n/vlan10.conflist', plugins: ['ipvlan'] },
      ],
    };
    const found = contextWith(added);
    await expect(
      decodeAttachRequest(attach({ network: 'vlan10' }), found.context),
    ).resolves.toEqual({
      allocId: 'a1',
      attachment: { network: 'vlan10' },
    });
    expect(found.reloads()).toBe(1);

    const missing = contextWith();
    expect(
      await refused(decodeAttachRequest(attach({ network: 'vlan10' }), missing.context)),
    ).toEqual(
      invalid(
        'attachment.network',
        'attachment.network "vlan10" is not known (networks: "nomad", "storage")',
      ),
    );
    expect(missing.reloads()).toBe(1);
  });
});

describe('decodeDetachRequest', () => {
  it('gives the allocation and the interface', () => {
    expect(decodeDetachRequest({ allocId: 'a1', interfaceName: 'net1' })).toEqual({
      allocId: 'a1',
      ifName: 'net1',
    });
  });

  it('refuses an empty interface or a bad id, naming the field', async () => {
    expect(
      await refused(
        Promise.resolve().then(() => decodeDetachRequest({ allocId: 'a1', interfaceName: '' })),
      ),
    ).toEqual(
      invalid('interface_name', "interface_name is empty; name the attachment's interface"),
    );
    expect(
      (
        await refused(
          Promise.resolve().then(() =>
            decodeDetachRequest({ allocId: 'a b', interfaceName: 'net1' }),
          ),
        )
      ).metadata['allocnet-field'],
    ).toBe('alloc_id');
  });
});
