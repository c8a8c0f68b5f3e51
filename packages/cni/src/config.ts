import { readFile, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import * as t from 'io-ts';
import { checkedString } from './codecs.js';
import { decode } from './decode.js';
import { formatPath } from '@allocnet/base';
import { namesInDir } from '@allocnet/base/files';
import type { FieldPath } from '@allocnet/base';
import { CniError } from './errors.js';
import { NAME_PATTERN } from './validate.js';
import { isVersion } from './version.js';

/** One plugin of a network: its `type`, declared capabilities, and its object as written. */
export interface PluginConfig {
  readonly type: string;
  /** Capabilities the plugin declares (`true` only): the runtimeConfig keys it is given. */
  readonly capabilities: readonly string[];
  /** The plugin's object from the file, unknown fields included, untouched. */
  readonly raw: Readonly<Record<string, unknown>>;
}

/** A network configuration list (a single-plugin `.conf` becomes a one-plugin list). */
export interface NetworkConfig {
  readonly name: string;
  readonly cniVersion: string | undefined;
  readonly cniVersions: readonly string[];
  readonly disableCheck: boolean;
  readonly disableGC: boolean;
  readonly plugins: readonly PluginConfig[];
  /** The file it came from, if any. */
  readonly source: string | undefined;
  /** The list as JSON (for `.conf`, the list made from it): what the result cache records. */
  readonly bytes: string;
}

const NetworkName = checkedString(
  'NetworkName',
  (s) => NAME_PATTERN.test(s),
  (s) => `${JSON.stringify(s)} does not match ${NAME_PATTERN.source}`,
);
const Version = checkedString(
  'Version',
  isVersion,
  (s) => `${JSON.stringify(s)} is not a version (MAJOR.MINOR.PATCH)`,
);
const PluginType = checkedString(
  'PluginType',
  (s) => s !== '' && !s.includes('/') && !s.includes('\0'),
  (s) => (s === '' ? 'is empty' : `${JSON.stringify(s)} contains "/"`),
);

/** A boolean, or the strings "true"/"false" in any case (as libcni reads them). */
const BoolLike = new t.Type<boolean, boolean, unknown>(
  'BoolLike',
  (u): u is boolean => typeof u === 'boolean',
  (u, c) => {
    if (typeof u === 'boolean') return t.success(u);
    if (typeof u === 'string' && /^(true|false)$/i.test(u))
      return t.success(u.toLowerCase() === 'true');
    return t.failure(u, c, `should be true, false, "true" or "false", got ${JSON.stringify(u)}`);
  },
  t.identity,
);

const Plugin = t.intersection([
  t.type({ type: PluginType }),
  t.partial({ capabilities: t.record(t.string, t.boolean), name: t.string, cniVersion: t.string }),
]);

const NonEmptyPlugins = new t.Type<t.TypeOf<typeof Plugin>[], unknown[], unknown>(
  'NonEmptyPlugins',
  (u): u is t.TypeOf<typeof Plugin>[] =>
    Array.isArray(u) && u.length > 0 && u.every((p) => Plugin.is(p)),
  (u, c) => {
    if (!Array.isArray(u))
      return t.failure(u, c, `should be a list of plugins, got ${JSON.stringify(u)}`);
    if (u.length === 0) return t.failure(u, c, 'is empty; a network needs at least one plugin');
    return t.array(Plugin).validate(u, c);
  },
  t.identity,
);

const VersionFields = t.partial({ cniVersion: Version, cniVersions: t.array(Version) });
const ListFlags = t.partial({ disableCheck: BoolLike, disableGC: BoolLike });

const ConfList = t.intersection([
  t.type({ name: NetworkName, plugins: NonEmptyPlugins }),
  VersionFields,
  ListFlags,
]);
const SingleConf = t.intersection([
  t.type({ name: NetworkName }),
  Plugin,
  t.partial({ cniVersion: Version }),
]);

function invalid(source: string | undefined, path: FieldPath, problem: string): CniError {
  const where = source === undefined ? 'network configuration' : JSON.stringify(source);
  const what = path.length === 0 ? problem : `${formatPath(path)} ${problem}`;
  return new CniError(`${where}: ${what}`, {
    code: 'invalid-config',
    specCode: 7,
    msg: what,
    ...(source === undefined ? {} : { file: source }),
    path,
    problem: [problem],
  });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function writable(value: unknown): boolean {
  try {
    JSON.stringify(value);
    return true;
  } catch {
    // Nested deeper than JSON.stringify's stack (RangeError): the caller names where.
    return false;
  }
}

/** The field of a configuration JSON.stringify gives up on: a top-level one, or a plugin's. */
function unwritablePath(input: unknown): FieldPath {
  const firstIn = (value: unknown) =>
    typeof value === 'object' && value !== null
      ? Object.entries(value as Record<string, unknown>).find(([, v]) => !writable(v))
      : undefined;
  const top = firstIn(input);
  if (top === undefined) return [];
  const [key, plugins] = top;
  if (key !== 'plugins' || !Array.isArray(plugins)) return [key];
  const index = plugins.findIndex((p) => !writable(p));
  const inner = firstIn(plugins[index]);
  return inner === undefined ? [key, index] : [key, index, inner[0]];
}

/**
 * `written` (the configuration list) as JSON text, what the cache records. JSON.parse reads a
 * value nested thousands deep that JSON.stringify cannot write back: that is `invalid-config`
 * naming the field of `input` (what the caller gave).
 */
function bytesOf(written: unknown, input: unknown, source: string | undefined): string {
  try {
    return JSON.stringify(written);
  } catch {
    // A RangeError (the stack): a field too deep, named below; nothing else makes JSON.parse's
    // output unwritable.
    throw invalid(source, unwritablePath(input), 'is nested too deep to be written as JSON');
  }
}

function pluginOf(raw: Record<string, unknown>): PluginConfig {
  const caps = isObject(raw.capabilities) ? raw.capabilities : {};
  return {
    type: raw.type as string,
    capabilities: Object.entries(caps)
      .filter(([, on]) => on === true)
      .map(([k]) => k),
    raw,
  };
}

/**
 * Reads a network configuration from a parsed JSON value: a list (it has `plugins`) or a single
 * plugin configuration, which becomes a one-plugin list. Unknown fields are kept as they are.
 * Throws `CniError` (`invalid-config`) naming the source and the field.
 */
export function parseNetworkConfig(value: unknown, source?: string): NetworkConfig {
  if (!isObject(value))
    throw invalid(source, [], `should be a JSON object, got ${JSON.stringify(value)}`);
  if ('plugins' in value) {
    const decoded = decode(ConfList, value);
    if (!decoded.ok) throw invalid(source, decoded.problem.path, decoded.problem.problem);
    const list = decoded.value;
    if (list.cniVersion === undefined && (list.cniVersions ?? []).length === 0) {
      throw invalid(source, ['cniVersion'], 'is missing (and there is no cniVersions)');
    }
    return {
      name: list.name,
      cniVersion: list.cniVersion,
      cniVersions: list.cniVersions ?? [],
      disableCheck: list.disableCheck ?? false,
      disableGC: list.disableGC ?? false,
      plugins: (value.plugins as Record<string, unknown>[]).map(pluginOf),
      source,
      bytes: bytesOf(value, value, source),
    };
  }
  const decoded = decode(SingleConf, value);
  if (!decoded.ok) throw invalid(source, decoded.problem.path, decoded.problem.problem);
  const conf = decoded.value;
  if (conf.cniVersion === undefined) throw invalid(source, ['cniVersion'], 'is missing');
  const list = { cniVersion: conf.cniVersion, name: conf.name, plugins: [value] };
  return {
    name: conf.name,
    cniVersion: conf.cniVersion,
    cniVersions: [],
    disableCheck: false,
    disableGC: false,
    plugins: [pluginOf(value)],
    source,
    bytes: bytesOf(list, value, source),
  };
}

/** Parses a configuration from JSON text. */
export function parseNetworkConfigText(text: string, source?: string): NetworkConfig {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw invalid(source, [], `is not JSON: ${(error as Error).message}`);
  }
  return parseNetworkConfig(value, source);
}

/** Reads and parses one configuration file. */
export async function loadNetworkConfigFile(file: string): Promise<NetworkConfig> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw invalid(file, [], `cannot be read: ${(error as Error).message}`);
  }
  return parseNetworkConfigText(text, file);
}

/** The extensions a configuration directory is searched for. */
export const CONFIG_EXTENSIONS: readonly string[] = ['.conf', '.conflist', '.json'];

/**
 * The configuration files of a directory: `.conf`, `.conflist` and `.json` regular files (symlinks
 * to them included), in byte order of their names. A missing directory has none.
 */
export async function listConfigFiles(dir: string): Promise<string[]> {
  const candidates = (await namesInDir(dir))
    .filter((n) => CONFIG_EXTENSIONS.includes(extname(n)))
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const files: string[] = [];
  for (const name of candidates) {
    const path = join(dir, name);
    try {
      if ((await stat(path)).isFile()) files.push(path);
    } catch (error) {
      // A dangling symlink is not a configuration; anything else is a real problem.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  return files;
}

/** Every network of a directory, and every file that is not one, with the reason. */
export interface NetworkListing {
  readonly networks: readonly NetworkConfig[];
  readonly invalid: readonly { readonly file: string; readonly error: CniError }[];
}

/**
 * Reads every configuration file of `dir`, in order. A file that cannot be read, or that names a
 * network an earlier file already defines (the earlier one wins), is listed in `invalid` with its
 * reason instead of being hidden.
 */
export async function listNetworks(dir: string): Promise<NetworkListing> {
  const networks: NetworkConfig[] = [];
  const invalidFiles: { file: string; error: CniError }[] = [];
  for (const file of await listConfigFiles(dir)) {
    try {
      const network = await loadNetworkConfigFile(file);
      const earlier = networks.find((n) => n.name === network.name);
      if (earlier === undefined) networks.push(network);
      else {
        invalidFiles.push({
          file,
          error: invalid(
            file,
            ['name'],
            `${JSON.stringify(network.name)} is already defined by ${JSON.stringify(earlier.source)}`,
          ),
        });
      }
    } catch (error) {
      if (!(error instanceof CniError)) throw error;
      invalidFiles.push({ file, error });
    }
  }
  return { networks, invalid: invalidFiles };
}

/**
 * The network called `name` in `dir`: the first file, in byte order, that defines it. Files that
 * cannot be read do not hide it; when it is not found, the error says which files were skipped.
 */
export async function findNetwork(dir: string, name: string): Promise<NetworkConfig> {
  const listing = await listNetworks(dir);
  const found = listing.networks.find((n) => n.name === name);
  if (found !== undefined) return found;
  const skipped =
    listing.invalid.length === 0
      ? ''
      : `; ${listing.invalid.length} file(s) could not be read: ${listing.invalid.map((i) => i.error.message).join('; ')}`;
  const msg = `no network ${JSON.stringify(name)} in ${JSON.stringify(dir)}${skipped}`;
  throw new CniError(msg, { code: 'network-not-found', msg, network: name });
}

/** The versions a network offers: its `cniVersion` and `cniVersions`. */
export function offeredVersions(network: NetworkConfig): string[] {
  return [
    ...new Set([
      ...(network.cniVersion === undefined ? [] : [network.cniVersion]),
      ...network.cniVersions,
    ]),
  ];
}
