export {
  ERROR_KINDS,
  carriedKind,
  formatPath,
  invalidInputOf,
  kindOf,
  messageIn,
  messageOf,
  moveProblemFields,
  renderProblem,
  show,
} from './errors.js';
export type {
  ContractError,
  ErrorKind,
  FieldPath,
  FieldSpelling,
  Problem,
  ProblemPart,
} from './errors.js';
export { logInfo, silentLogger } from './logger.js';
export type { Logger } from './logger.js';
export { SLICE_MS, createPause, nextTurn, runSliced, runWhole } from './slices.js';
export type { Sliceable } from './slices.js';
