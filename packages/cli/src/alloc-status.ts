// An allocation's status as `allocnet alloc` prints it for people: lines for one, rows for many.
import type { AllocNetworkStatus__Output, PortMapping__Output } from '@allocnet/proto';
import { formatTable } from './table.js';

function portsText(mappings: readonly PortMapping__Output[]): string {
  // tcp and udp of one port print as one: 8080→80
  const seen = new Set<string>();
  const parts: string[] = [];
  for (const m of mappings) {
    const key = `${m.hostIp === '' ? '' : `${m.hostIp}:`}${m.hostPort}→${m.containerPort}`;
    if (seen.has(key)) continue;
    seen.add(key);
    parts.push(key);
  }
  return parts.join(',') || '-';
}

const PHASES: Record<string, string> = {
  PHASE_SETTING_UP: 'setting-up',
  PHASE_READY: 'ready',
  PHASE_TEARING_DOWN: 'tearing-down',
  PHASE_FAILED: 'failed',
  PHASE_RESTORING: 'restoring',
};

export function phaseName(phase: string): string {
  return PHASES[phase] ?? phase.toLowerCase();
}

/**
 * Who asked for an allocation: `grpc` (the scheduler's API, or `allocnet alloc setup`), else the
 * runtime that asked through the agent's CNI server (`nomad`, `kubernetes`, `podman`, `cni`).
 */
export function originName(s: { readonly origin: { readonly runtime: string } | null }): string {
  return s.origin === null ? 'grpc' : s.origin.runtime || 'cni';
}

/** Whose the namespace is: the agent's, the runtime's (CNI), or a task driver's (no note). */
function netnsNote(s: AllocNetworkStatus__Output): string {
  if (s.netnsCreatedByAgent) return ' (made by the agent)';
  return s.origin === null ? '' : " (the runtime's)";
}

export function statusLines(s: AllocNetworkStatus__Output): string[] {
  const origin =
    s.origin === null
      ? originName(s)
      : `${originName(s)} (container ${s.origin.containerId || '-'}, ifname ${s.origin.ifname || '-'})`;
  return [
    `${s.allocId}: ${phaseName(s.phase)} in network ${s.network}`,
    `  origin     ${origin}`,
    `  interface  ${s.interfaceName || '-'}`,
    `  address    ${s.address || '-'}${s.addressIpv6 === '' ? '' : `  ${s.addressIpv6}`}`,
    `  ports      ${portsText(s.portMappings)}`,
    `  netns      ${s.netnsPath || '-'}${netnsNote(s)}`,
    `  attempts   ${s.attempts}`,
    ...(s.dns !== null && s.dns.servers.length > 0
      ? [`  dns        ${s.dns.servers.join(',')}`]
      : []),
    ...(s.error === '' ? [] : [`  error      ${s.error}`]),
    ...attachmentLines(s),
  ];
}

const ATTACHMENT_HEADER = ['IFNAME', 'NETWORK', 'PHASE', 'ADDRESSES', 'MAC', 'PORTS', 'BY'];

/**
 * One row per network of the allocation, the primary first: its addresses with their prefix,
 * and `setup` or `attach` for the call that added it. None from an agent that does not list them.
 */
function attachmentLines(s: AllocNetworkStatus__Output): string[] {
  if (s.attachments.length === 0) return [];
  const rows = s.attachments.map((a) => [
    a.interfaceName,
    a.network,
    phaseName(a.phase),
    a.addresses.join(',') || '-',
    a.mac || '-',
    portsText(a.portMappings),
    a.attached ? 'attach' : 'setup',
  ]);
  const table = formatTable(ATTACHMENT_HEADER, rows).trimEnd().split('\n');
  return ['  networks', ...table.map((line) => `    ${line}`)];
}

/** What a row of `alloc list` reads of a status: of its attachments, only how many there are. */
export const ROW_FIELDS = ['allocId', 'phase', 'network', 'attachments', 'address', 'addressIpv6', 'portMappings', 'origin', 'netnsPath'] as const; // prettier-ignore
export type StatusRow = Pick<
  AllocNetworkStatus__Output,
  Exclude<(typeof ROW_FIELDS)[number], 'attachments' | 'origin'>
> & {
  readonly attachments: readonly unknown[];
  readonly origin: { readonly runtime: string } | null;
};

export function statusRows(list: readonly StatusRow[]): string[][] {
  return list.map((s) => [
    s.allocId,
    phaseName(s.phase),
    s.network,
    // An agent that does not list attachments has one network per allocation.
    String(Math.max(1, s.attachments.length)),
    s.address || s.addressIpv6 || '-',
    portsText(s.portMappings),
    originName(s),
    s.netnsPath || '-',
  ]);
}

export const STATUS_HEADER = [
  'ALLOC ID',
  'PHASE',
  'NETWORK',
  'NETS',
  'ADDRESS',
  'PORTS',
  'ORIGIN',
  'NETNS',
];
