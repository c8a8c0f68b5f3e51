import { pluginFailure } from './plugin-output.js';

/** Whether `text` holds a control character (what a terminal or a log parser would act on). */
const hasControl = (text: string) =>
  Array.from({ length: text.length }, (_, i) => text.charCodeAt(i)).some(
    (code) => code < 0x20 || (code >= 0x7f && code <= 0x9f),
  );

describe('pluginFailure', () => {
  it('never copies a plugin’s raw control bytes into the message: they are written as \\xNN', () => {
    const garbage = '\u001b[31mboom\u0000\u0007 \u009b2J';
    const error = pluginFailure('bad', 'ADD', 'c1', {
      kind: 'exited',
      exitCode: 1,
      stdout: garbage,
      stderr: '',
    });
    expect(hasControl(error.message)).toBe(false);
    expect(error.message).toBe(
      'plugin "bad" failed (ADD) for "c1": \\x1b[31mboom\\x00\\x07 \\x9b2J (exit status 1)',
    );
  });

  it('does the same for the msg and details of the spec’s error JSON', () => {
    const error = pluginFailure('bad', 'DEL', undefined, {
      kind: 'exited',
      exitCode: 1,
      stdout: JSON.stringify({
        cniVersion: '1.0.0',
        code: 11,
        msg: 'busy\u001b[0m',
        details: 'x\ny',
      }),
      stderr: '',
    });
    expect(hasControl(error.message)).toBe(false);
    expect(error.message).toBe('plugin "bad" failed (DEL): busy\\x1b[0m: x y');
    expect(error.code).toBe('try-again-later');
  });
});
