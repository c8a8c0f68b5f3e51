import {
  ERROR_KINDS,
  carriedKind,
  formatPath,
  invalidInputOf,
  kindOf,
  messageIn,
  messageOf,
  renderProblem,
  show,
} from './errors.js';
import type { ErrorKind, FieldPath, Problem } from './errors.js';

/** An error of some package, as the contract shapes it. */
class PackageError extends Error {
  readonly parts: Problem | undefined;
  constructor(
    message: string,
    readonly kind: ErrorKind,
    readonly path?: FieldPath,
    readonly problem?: Problem,
    parts?: Problem,
  ) {
    super(message);
    this.parts = parts;
  }
}

const upper = (path: FieldPath) => path.map(String).join('/').toUpperCase();

describe('field paths', () => {
  it.each<[FieldPath, string]>([
    [[], ''],
    [['network'], 'network'],
    [['ports', 2, 'hostIp'], 'ports[2].hostIp'],
    [
      ['spec', 'legacyNetworks', 0, 'reservedPorts', 1, 'value'],
      'spec.legacyNetworks[0].reservedPorts[1].value',
    ],
    [['cniArgs', 'a;b'], 'cniArgs.a;b'],
    [['--args', 1], '--args[1]'],
  ])('%j is %s', (path, text) => {
    expect(formatPath(path)).toBe(text);
  });

  it('renders a problem with the fields it names in the spelling asked for', () => {
    const problem: Problem = [
      'claims port 80, which ',
      { field: ['ports', 0, 'value'] },
      ' claims',
    ];
    expect(renderProblem(problem)).toBe('claims port 80, which ports[0].value claims');
    expect(renderProblem(problem, upper)).toBe('claims port 80, which PORTS/0/VALUE claims');
  });
});

describe('reading the contract off any error', () => {
  it('reads the kind of the error itself, never of its causes or its text', () => {
    expect(kindOf(new PackageError('x', 'conflict'))).toBe('conflict');
    const wrapped = new Error('unavailable', { cause: new PackageError('y', 'unavailable') });
    expect(kindOf(wrapped)).toBeUndefined();
    expect(kindOf({ kind: 'nonsense' })).toBeUndefined();
    expect(kindOf('invalid')).toBeUndefined();
    expect(kindOf(undefined)).toBeUndefined();
  });

  it('knows every kind', () => {
    for (const kind of ERROR_KINDS) expect(kindOf({ kind })).toBe(kind);
    expect(ERROR_KINDS).toEqual([
      'invalid',
      'not-found',
      'conflict',
      'unavailable',
      'aborted',
      'broken',
      'exhausted',
      'internal',
    ]);
  });

  it('gives the field and problem of an invalid input only', () => {
    const bad = new PackageError('ports[1].value is 0', 'invalid', ['ports', 1, 'value'], ['is 0']);
    expect(invalidInputOf(bad)).toEqual({ path: ['ports', 1, 'value'], problem: ['is 0'] });
    expect(invalidInputOf(new PackageError('x', 'internal', ['a'], ['b']))).toBeUndefined();
    expect(invalidInputOf(new PackageError('x', 'invalid'))).toBeUndefined();
  });

  it('carries unavailable, aborted and broken through a wrapper; anything else is the fallback', () => {
    expect(carriedKind(new PackageError('x', 'unavailable'))).toBe('unavailable');
    expect(carriedKind(new PackageError('x', 'aborted'))).toBe('aborted');
    expect(carriedKind(new PackageError('x', 'broken'))).toBe('broken');
    expect(carriedKind(new PackageError('x', 'exhausted'))).toBe('exhausted');
    expect(carriedKind(new PackageError('x', 'invalid'))).toBe('internal');
    expect(carriedKind(new PackageError('x', 'not-found'), 'conflict')).toBe('conflict');
    expect(carriedKind(new Error('plain'))).toBe('internal');
  });

  it('spells the fields a message names, or gives the message as it is', () => {
    const parts: Problem = ['(', { field: ['jobId'] }, ', ', { field: ['ports'] }, ' differ)'];
    const error = new PackageError(
      '(jobId, ports differ)',
      'conflict',
      undefined,
      undefined,
      parts,
    );
    expect(messageIn(error, upper)).toBe('(JOBID, PORTS differ)');
    expect(messageIn(new Error('as it is'), upper)).toBe('as it is');
  });
});

describe('messages', () => {
  it('gives the message of anything thrown', () => {
    expect(messageOf(new Error('e'))).toBe('e');
    expect(messageOf({ message: 'from another realm' })).toBe('from another realm');
    expect(messageOf('text')).toBe('text');
    expect(messageOf({ code: 1 })).toBe('{"code":1}');
    expect(messageOf(undefined)).toBe('undefined');
  });

  it('quotes values as JSON, cut at 80 characters', () => {
    expect(show('a')).toBe('"a"');
    expect(show(undefined)).toBe('nothing');
    expect(show(() => 1)).toBe('<function>');
    expect(show('x'.repeat(100))).toBe(`"${'x'.repeat(76)}...`);
  });
});
