import { parseSoakArgs } from './args.js';
import { SoakError } from './errors.js';

function refusal(argv: readonly string[]): { message: string; flag: string | undefined } {
  try {
    parseSoakArgs(argv);
  } catch (error) {
    if (error instanceof SoakError) return { message: error.message, flag: error.flag };
    throw error;
  }
  throw new Error(`${argv.join(' ')} was accepted`);
}

describe('parseSoakArgs', () => {
  it('defaults to 2000 cycles 16 wide, a warm-up of 10% and a progress line every 5%', () => {
    expect(parseSoakArgs([])).toEqual({
      count: 2000,
      width: 16,
      warmup: 200,
      progressEvery: 100,
      json: false,
    });
  });

  it('takes every flag', () => {
    expect(
      parseSoakArgs([
        '--count',
        '64',
        '--width=8',
        '--warmup',
        '64',
        '--progress-every',
        '16',
        '--json',
      ]),
    ).toEqual({ count: 64, width: 8, warmup: 64, progressEvery: 16, json: true });
  });

  it('derives the warm-up (at least 1) and the progress interval (rounded up) from the count', () => {
    expect(parseSoakArgs(['--count', '5'])).toMatchObject({ warmup: 1, progressEvery: 1 });
    expect(parseSoakArgs(['--count', '64'])).toMatchObject({ warmup: 6, progressEvery: 4 });
  });

  it('answers help for -h and --help', () => {
    expect(parseSoakArgs(['-h'])).toBe('help');
    expect(parseSoakArgs(['--count', '3', '--help'])).toBe('help');
  });

  it.each([
    [['--count', '0'], '--count', '--count "0" is not a whole number from 1 to 10000000'],
    [['--count', '1e3'], '--count', '--count "1e3" is not a whole number from 1 to 10000000'],
    [['--count=-5'], '--count', '--count "-5" is not a whole number from 1 to 10000000'],
    [['--width', '1001'], '--width', '--width "1001" is not a whole number from 1 to 1000'],
    [['--width', ''], '--width', '--width "" is not a whole number from 1 to 1000'],
    [
      ['--count', '10', '--warmup', '11'],
      '--warmup',
      '--warmup "11" is not a whole number from 1 to 10',
    ],
    [
      ['--count', '10', '--progress-every', '0'],
      '--progress-every',
      '--progress-every "0" is not a whole number from 1 to 10',
    ],
  ])('refuses %j naming the flag', (argv, flag, message) => {
    expect(refusal(argv)).toEqual({ flag, message });
  });

  it('refuses an unknown flag, a missing value and a positional with parseArgs’s words', () => {
    expect(refusal(['--cont', '5'])).toEqual({
      flag: undefined,
      message: "allocnet-soak: Unknown option '--cont'",
    });
    expect(refusal(['--count'])).toEqual({
      flag: undefined,
      message: "allocnet-soak: Option '--count <value>' argument missing",
    });
    expect(refusal(['64'])).toEqual({
      flag: undefined,
      message:
        "allocnet-soak: Unexpected argument '64'. This command does not take positional arguments",
    });
  });
});
