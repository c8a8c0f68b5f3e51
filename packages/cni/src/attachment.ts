// The attachment ADD, CHECK and DEL act on: checked before anything runs, and recorded in (and
// read back from) the cache entries of results and ADD-in-progress markers.
import * as t from 'io-ts';
import type { CacheEntry } from './cache.js';
import type { NetworkConfig } from './config.js';
import { decode } from './decode.js';
import { invalidArgument } from './errors.js';
import type { CniVerb } from './errors.js';
import { checkArgs, checkContainerId, checkIfName } from './validate.js';
import type { CniArgs } from './validate.js';

/** One attachment of a container to a network: what ADD, CHECK and DEL act on. */
export interface Attachment {
  readonly containerId: string;
  /** The container's netns path. DEL goes on when it is gone. */
  readonly netns: string;
  readonly ifName: string;
  /** CNI_ARGS pairs; `IgnoreUnknown=1` is put first whenever there are any. */
  readonly args?: CniArgs;
  /** Capability arguments; each plugin gets, as runtimeConfig, those it declares. */
  readonly capabilityArgs?: Readonly<Record<string, unknown>>;
}

/** An attachment after `checkAttachment`: every field there and valid. */
export interface CheckedAttachment {
  readonly containerId: string;
  readonly ifName: string;
  readonly args: CniArgs;
  readonly netns: string;
  readonly capabilityArgs: Readonly<Record<string, unknown>>;
}

const CapabilityArgs = t.record(t.string, t.unknown);

/** Checks an attachment for `verb`; throws `invalid-argument` naming the field. */
export function checkAttachment(attachment: Attachment, verb: CniVerb): CheckedAttachment {
  const containerId = checkContainerId(attachment.containerId);
  const ifName = checkIfName(attachment.ifName);
  const args = checkArgs(attachment.args ?? []);
  const caps = decode(CapabilityArgs, attachment.capabilityArgs ?? {});
  if (!caps.ok)
    throw invalidArgument('capabilityArgs', 'should be an object of capability names to values');
  if ((verb === 'ADD' || verb === 'CHECK') && attachment.netns === '')
    throw invalidArgument('netns', 'is empty');
  if (attachment.netns.includes('\0')) throw invalidArgument('netns', 'contains a NUL character');
  return { containerId, ifName, args, netns: attachment.netns, capabilityArgs: caps.value };
}

/** The attachment a cache entry (a result, or an ADD-in-progress marker) records. */
export function attachmentOf(entry: CacheEntry): Attachment {
  return {
    containerId: entry.containerId,
    ifName: entry.ifName,
    netns: entry.netns ?? '',
    args: entry.cniArgs,
    capabilityArgs: entry.capabilityArgs,
  };
}

/** The cache entry for an attachment of `network`: a marker without `result`, a result with it. */
export function entryOf(
  network: NetworkConfig,
  a: CheckedAttachment,
  result?: unknown,
): CacheEntry {
  return {
    networkName: network.name,
    containerId: a.containerId,
    ifName: a.ifName,
    netns: a.netns === '' ? undefined : a.netns,
    cniArgs: a.args,
    capabilityArgs: a.capabilityArgs,
    config: network.bytes,
    result,
  };
}
