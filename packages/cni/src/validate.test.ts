import { CniError } from './errors.js';
import { checkArgs, checkContainerId, checkIfName, formatArgs, parseArgs } from './validate.js';

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof CniError)
      return `${error.code} (${error.specCode}) ${error.field}: ${error.message}`;
    throw error;
  }
  return 'accepted';
}

describe('checkContainerId', () => {
  it('takes ids the spec allows', () => {
    expect(checkContainerId('6b235529-8111-4bbe-520b-d639b1d2a94e')).toBe(
      '6b235529-8111-4bbe-520b-d639b1d2a94e',
    );
    expect(checkContainerId('a_b.c-d')).toBe('a_b.c-d');
  });

  it.each([
    ['', 'invalid-argument (3) containerId: containerId is empty'],
    [
      '-x',
      'invalid-argument (4) containerId: containerId "-x" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
    ],
    [
      'a/b',
      'invalid-argument (4) containerId: containerId "a/b" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
    ],
    [
      'a b',
      'invalid-argument (4) containerId: containerId "a b" has characters other than [a-zA-Z0-9_.-] or starts with one of "_.-"',
    ],
  ])('refuses %j', (id, message) => {
    expect(refusal(() => checkContainerId(id))).toBe(message);
  });
});

describe('checkIfName', () => {
  it('takes 1 to 15 bytes with dots inside', () => {
    expect(checkIfName('eth0')).toBe('eth0');
    expect(checkIfName('a.b')).toBe('a.b');
    expect(checkIfName('x'.repeat(15))).toBe('x'.repeat(15));
  });

  it.each([
    ['', 'ifName is empty'],
    ['x'.repeat(16), `ifName "${'x'.repeat(16)}" is 16 bytes; interface names have at most 15`],
    ['ééééééééé', 'ifName "ééééééééé" is 18 bytes; interface names have at most 15'],
    ['.', 'ifName "." is not an interface name'],
    ['..', 'ifName ".." is not an interface name'],
    ['a/b', 'ifName "a/b" contains "/", ":" or whitespace'],
    ['a:b', 'ifName "a:b" contains "/", ":" or whitespace'],
    ['a b', 'ifName "a b" contains "/", ":" or whitespace'],
    ['a\tb', 'ifName "a\\tb" contains "/", ":" or whitespace'],
    ['a\u00a0b', 'ifName "a\u00a0b" contains "/", ":" or whitespace'],
  ])('refuses %j', (name, message) => {
    expect(refusal(() => checkIfName(name))).toBe(`invalid-argument (4) ifName: ${message}`);
  });
});

describe('CNI_ARGS', () => {
  it('is empty without pairs and starts with IgnoreUnknown=1 with any', () => {
    expect(formatArgs([])).toBe('');
    expect(
      formatArgs([
        ['NOMAD_JOB', 'web'],
        ['NOMAD_ALLOC_ID', 'x'],
      ]),
    ).toBe('IgnoreUnknown=1;NOMAD_JOB=web;NOMAD_ALLOC_ID=x');
  });

  it('keeps the caller’s IgnoreUnknown', () => {
    expect(
      formatArgs([
        ['IgnoreUnknown', '0'],
        ['IP', '10.0.0.5'],
      ]),
    ).toBe('IgnoreUnknown=0;IP=10.0.0.5');
  });

  it.each([
    [[['a;b', 'x']], 'args[0]: args[0] key "a;b" contains ";" or "="'],
    [[['k', 'v=w']], 'args[0]: args[0] value "v=w" contains ";" or "="'],
    [
      [
        ['ok', '1'],
        ['k', 'a;b'],
      ],
      'args[1]: args[1] value "a;b" contains ";" or "="',
    ],
    [[['', 'v']], 'args[0]: args[0] has an empty key'],
  ] as [[string, string][], string][])('refuses %j', (pairs, message) => {
    expect(refusal(() => checkArgs(pairs))).toBe(`invalid-argument (4) ${message}`);
  });

  it('reads K=V;… text', () => {
    expect(parseArgs('A=1;B=')).toEqual([
      ['A', '1'],
      ['B', ''],
    ]);
    expect(parseArgs('')).toEqual([]);
    expect(refusal(() => parseArgs('A=1;B'))).toBe(
      'invalid-argument (4) args[1]: args[1] "B" is not K=V',
    );
    expect(refusal(() => parseArgs('A=1=2'))).toBe(
      'invalid-argument (4) args[0]: args[0] value "1=2" contains ";" or "="',
    );
  });
});
