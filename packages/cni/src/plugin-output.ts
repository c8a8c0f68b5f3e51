// What a plugin's output means. A failing plugin's output is read in libcni's order: error JSON on
// stdout, then on stderr, then the text itself, then "no error message"; a successful ADD's
// stdout is its result. Both become `CniError`s whose message starts with the plugin and verb.
import * as t from 'io-ts';
import { decode } from './decode.js';
import { CniError, codeName, isCniError } from './errors.js';
import type { CniVerb } from './errors.js';
import type { PluginExecResult } from './exec.js';
import { parseResult } from './result.js';
import type { CniResult } from './result.js';

const ErrorJson = t.intersection([
  t.type({ code: t.number, msg: t.string }),
  t.partial({ details: t.string }),
]);

function readErrorJson(text: string): t.TypeOf<typeof ErrorJson> | undefined {
  if (text.trim() === '') return undefined;
  try {
    const decoded = decode(ErrorJson, JSON.parse(text));
    return decoded.ok ? decoded.value : undefined;
  } catch {
    // Not JSON: the caller falls back to the text itself.
    return undefined;
  }
}

/**
 * A plugin's text made fit for a message (logs, gRPC status details, a terminal): control
 * characters (a terminal's escape sequences, NUL, C1) written as `\xNN`, never passed raw.
 */
export function printable(text: string): string {
  return text.replace(
    // eslint-disable-next-line no-control-regex
    /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g,
    (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}

/** Output for a message: one line, printable, at most 500 characters. */
export function oneLine(text: string): string {
  const trimmed = printable(text.trim().replace(/\s*\n\s*/g, ' '));
  return trimmed.length > 500 ? `${trimmed.slice(0, 497)}...` : trimmed;
}

/** The error for plugin `type` that did not exit 0 (or did not run to an end). */
export function pluginFailure(
  type: string,
  verb: CniVerb,
  containerId: string | undefined,
  result: PluginExecResult,
): CniError {
  const context = `plugin ${JSON.stringify(type)} failed (${verb})${containerId === undefined ? '' : ` for ${JSON.stringify(containerId)}`}`;
  const base = {
    plugin: type,
    verb,
    ...(containerId === undefined ? {} : { containerId }),
  };
  if (result.kind === 'failed') {
    const msg = result.message;
    return new CniError(`${context}: ${msg}`, {
      ...base,
      code: result.reason === 'killed' ? 'plugin-error' : result.reason,
      msg,
    });
  }
  const reported = readErrorJson(result.stdout) ?? readErrorJson(result.stderr);
  if (reported !== undefined) {
    const text = oneLine(
      reported.details === undefined || reported.details === ''
        ? reported.msg
        : `${reported.msg}: ${reported.details}`,
    );
    return new CniError(`${context}: ${text}`, {
      ...base,
      code: codeName(reported.code),
      specCode: reported.code,
      msg: reported.msg,
      ...(reported.details === undefined ? {} : { details: reported.details }),
    });
  }
  const text =
    result.stderr.trim() !== ''
      ? oneLine(result.stderr)
      : result.stdout.trim() !== ''
        ? oneLine(result.stdout)
        : 'no error message';
  const msg = `${text} (exit status ${result.exitCode})`;
  return new CniError(`${context}: ${msg}`, { ...base, code: 'plugin-error', msg });
}

/** The result plugin `type` printed on stdout; `invalid-result` when it cannot be read. */
export function parsedResult(
  type: string,
  verb: CniVerb,
  containerId: string,
  stdout: string,
  cniVersion: string,
): CniResult {
  try {
    return parseResult(stdout.trim() === '' ? {} : (JSON.parse(stdout) as unknown), cniVersion);
  } catch (error) {
    const why =
      (isCniError(error) && error.code === 'invalid-result') || error instanceof SyntaxError
        ? error.message
        : String(error);
    // The reason quotes the plugin's output (JSON.parse's snippet, a field's value): one
    // printable line, as everything else a plugin prints.
    const msg = `result cannot be read: ${oneLine(why)}`;
    throw new CniError(
      `plugin ${JSON.stringify(type)} failed (${verb}) for ${JSON.stringify(containerId)}: ${msg}`,
      {
        code: 'invalid-result',
        msg,
        plugin: type,
        verb,
        containerId,
        cause: error,
      },
    );
  }
}
