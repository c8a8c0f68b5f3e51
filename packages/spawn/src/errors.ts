import { constants as osConstants } from 'node:os';
import { getSystemErrorMap } from 'node:util';

/** A process that could not be started. `code` is the errno name (ENOENT, EACCES, ETXTBSY…). */
export class SpawnError extends Error {
  override readonly name = 'SpawnError';
  readonly code: string;
  readonly file: string;

  /** `detail` defaults to the system's text for `code` ("no such file or directory"). */
  constructor(file: string, code: string, detail?: string, options?: ErrorOptions) {
    super(`spawn ${file} ${code}: ${detail ?? systemMessage(code)}`, options);
    this.code = code;
    this.file = file;
  }
}

export function isSpawnError(error: unknown): error is SpawnError {
  return error instanceof Error && error.name === 'SpawnError' && 'code' in error;
}

const systemMessages = new Map<string, string>(
  [...getSystemErrorMap().values()].map(([name, message]) => [name, message]),
);
const errnoNames = new Map<number, string>(
  Object.entries(osConstants.errno).map(([name, value]) => [value, name]),
);

/** The system's text for an errno name: "no such file or directory" for ENOENT. */
export const systemMessage = (code: string) => systemMessages.get(code) ?? code;

/** The errno name of a number: ENOENT for 2. */
export const errnoName = (errno: number) => errnoNames.get(errno) ?? `errno ${errno}`;
