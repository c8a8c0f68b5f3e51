import { Malformed, formatIPv6, readBackRule } from './nft-rule.js';
import { knownRule, ruleFromStatement } from './rule.js';
import { plainRules } from './testing/index.js';
import {
  be32,
  commentInfo,
  cstring,
  encodeAttributes,
  expr,
  ruleMessage,
} from './testing/index.js';
import type { NftExpression } from './testing/index.js';

const NETWORK = 1;
const TRANSPORT = 2;
const EQ = 0;
const NEQ = 1;
const JUMP = -3;
const GOTO = -4;

/** A rule of nat POSTROUTING with these expressions, read back for `family`. */
function back(exprs: NftExpression[], family: 'ipv4' | 'ipv6' = 'ipv4') {
  return readBackRule(
    ruleMessage({ table: 'nat', chain: 'POSTROUTING', handle: 7n, exprs }),
    family,
  );
}

const ip4 = (text: string) => Buffer.from(text.split('.').map(Number));
const host = (value: number, bytes: number) => {
  const b = Buffer.alloc(bytes);
  if (bytes === 2) b.writeUInt16LE(value);
  else b.writeUInt32LE(value);
  return b;
};
const TAG = 'name: "nomad" id: "a1"';

describe('readBackRule', () => {
  it('reads back bridge’s masquerade jump as iptables-save prints it, with its handle', () => {
    const rule = back([
      expr.payload(NETWORK, 12, 4),
      expr.cmp(EQ, ip4('10.88.0.5')),
      expr.match('comment', 0, commentInfo(TAG)),
      expr.counter(),
      expr.verdict(JUMP, 'CNI-0123456789abcdef01234567'),
    ]);
    expect(rule).toEqual({
      handle: 7n,
      spec: [
        '-s',
        '10.88.0.5/32',
        '-m',
        'comment',
        '--comment',
        TAG,
        '-j',
        'CNI-0123456789abcdef01234567',
      ],
      comment: TAG,
      target: 'CNI-0123456789abcdef01234567',
      targetAt: 6,
    });
  });

  it('prints -s, -d and -p before the matches, whatever the order of their expressions', () => {
    const rule = back([
      expr.meta(16),
      expr.cmp(EQ, Buffer.from([17])),
      expr.payload(NETWORK, 16, 4),
      expr.cmp(EQ, ip4('192.168.1.1')),
      expr.payload(NETWORK, 12, 2),
      expr.cmp(EQ, ip4('10.88.0.0').subarray(0, 2)),
      expr.payload(TRANSPORT, 2, 2),
      expr.cmp(EQ, Buffer.from([0x00, 0x35])),
      expr.counter(),
      expr.verdict(1),
    ]);
    expect(rule.spec).toEqual(
      '-s 10.88.0.0/16 -d 192.168.1.1/32 -p udp -m udp --dport 53 -j ACCEPT'.split(' '),
    );
  });

  it('reads a mask as a prefix length and a not-equal as "!"', () => {
    const rule = back([
      expr.payload(NETWORK, 16, 4),
      expr.bitwise(ip4('240.0.0.0')),
      expr.cmp(NEQ, ip4('224.0.0.0')),
      expr.target('MASQUERADE', 0, Buffer.concat([host(1, 4), Buffer.alloc(20)])),
    ]);
    expect(rule.spec).toEqual(['!', '-d', '224.0.0.0/4', '-j', 'MASQUERADE']);
  });

  it('reads portmap’s DNAT jump: -p, the comment, multiport', () => {
    const multiport = Buffer.alloc(48);
    multiport[0] = 1; // destination ports
    multiport[1] = 3;
    [8080, 9000, 9010].forEach((p, i) => multiport.writeUInt16LE(p, 2 + 2 * i));
    multiport[32 + 1] = 1; // 9000:9010
    const rule = back([
      expr.meta(16),
      expr.cmp(EQ, Buffer.from([6])),
      expr.match('comment', 0, commentInfo(`dnat ${TAG}`)),
      expr.match('multiport', 1, multiport),
      expr.counter(),
      expr.verdict(JUMP, 'CNI-DN-0123456789abcdef01234'),
    ]);
    expect(rule.spec).toEqual([
      '-p', 'tcp', '-m', 'comment', '--comment', `dnat ${TAG}`,
      '-m', 'multiport', '--dports', '8080,9000:9010', '-j', 'CNI-DN-0123456789abcdef01234',
    ]); // prettier-ignore
  });

  it('reads the firewall’s accepts, IPv6', () => {
    const conntrack = Buffer.alloc(168);
    conntrack.writeUInt16LE(1, 146);
    conntrack.writeUInt16LE(0b110, 150);
    const address = Buffer.from('fd000000000000000000000000000005', 'hex');
    const rule = back(
      [
        expr.payload(NETWORK, 24, 16),
        expr.cmp(EQ, address),
        expr.match('conntrack', 3, conntrack),
        expr.counter(),
        expr.verdict(1),
      ],
      'ipv6',
    );
    expect(rule.spec).toEqual(
      '-d fd00::5/128 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT'.split(' '),
    );
    expect(
      back([expr.payload(NETWORK, 8, 16), expr.cmp(EQ, address), expr.verdict(1)], 'ipv6').spec,
    ).toEqual(['-s', 'fd00::5/128', '-j', 'ACCEPT']);
  });

  it('reads DNAT to an address and a port, both families', () => {
    const range = (address: Buffer, port: number) => {
      const info = Buffer.alloc(48);
      info.writeUInt32LE(3, 0);
      address.copy(info, 4);
      address.copy(info, 20);
      info.writeUInt16BE(port, 36);
      info.writeUInt16BE(port, 38);
      return info;
    };
    expect(back([expr.target('DNAT', 2, range(ip4('10.88.0.5'), 80))]).spec).toEqual([
      '-j', 'DNAT', '--to-destination', '10.88.0.5:80',
    ]); // prettier-ignore
    const v6 = Buffer.from('fd000000000000000000000000000005', 'hex');
    expect(back([expr.target('DNAT', 2, range(v6, 53))], 'ipv6').spec).toEqual([
      '-j', 'DNAT', '--to-destination', '[fd00::5]:53',
    ]); // prettier-ignore
  });

  it('reads the mark match and the MARK target, and goto and return', () => {
    expect(
      back([
        expr.meta(3),
        expr.bitwise(host(0x2000, 4)),
        expr.cmp(EQ, host(0x2000, 4)),
        expr.target('MASQUERADE', 0, Buffer.concat([host(1, 4), Buffer.alloc(20)])),
      ]).spec,
    ).toEqual(['-m', 'mark', '--mark', '0x2000/0x2000', '-j', 'MASQUERADE']);
    expect(back([expr.meta(3), expr.cmp(NEQ, host(1, 4)), expr.verdict(-5)]).spec).toEqual([
      '-m', 'mark', '!', '--mark', '0x1', '-j', 'RETURN',
    ]); // prettier-ignore
    const mark = Buffer.concat([host(0x2000, 4), host(0x2000, 4)]);
    expect(back([expr.target('MARK', 2, mark)]).spec).toEqual([
      '-j', 'MARK', '--set-xmark', '0x2000/0x2000',
    ]); // prettier-ignore
    expect(back([expr.verdict(GOTO, 'CNI-ADMIN')]).spec).toEqual(['-g', 'CNI-ADMIN']);
  });

  it('builds, unchecked, the rule that parsing its arguments gives: comment, target, matches', () => {
    const dnat = Buffer.alloc(48);
    dnat.writeUInt32LE(3, 0);
    ip4('10.88.0.5').copy(dnat, 4);
    ip4('10.88.0.5').copy(dnat, 20);
    dnat.writeUInt16BE(80, 36);
    dnat.writeUInt16BE(80, 38);
    const shapes: NftExpression[][] = [
      [
        expr.payload(NETWORK, 12, 4),
        expr.cmp(EQ, ip4('10.88.0.5')),
        expr.match('comment', 0, commentInfo(TAG)),
        expr.match('comment', 0, commentInfo('-j x')),
        expr.verdict(JUMP, 'CNI-0123456789abcdef01234567'),
      ],
      [expr.match('comment', 0, commentInfo('!')), expr.target('DNAT', 2, dnat)],
      [expr.target('MARK', 2, Buffer.concat([host(0x2000, 4), host(0x2000, 4)]))],
      [expr.meta(3), expr.cmp(NEQ, host(1, 4)), expr.verdict(GOTO, 'CNI-ADMIN')],
      [expr.meta(16), expr.cmp(EQ, Buffer.from([6])), expr.payload(TRANSPORT, 2, 2), expr.cmp(EQ, Buffer.from([0, 1]))],
    ]; // prettier-ignore
    for (const exprs of shapes) {
      const { spec, comment, targetAt } = back(exprs);
      if (spec === undefined) throw new Error('read back as opaque');
      const parsed = ruleFromStatement(
        'nat',
        'POSTROUTING',
        { values: spec, quoted: [], line: 1 },
        0,
      );
      expect(plainRules(knownRule('nat', 'POSTROUTING', spec, comment, targetAt))).toEqual(
        plainRules(parsed),
      );
    }
  });

  it('puts both ports of a rule in one tcp match, the source first', () => {
    const rule = back([
      expr.meta(16),
      expr.cmp(EQ, Buffer.from([6])),
      expr.payload(TRANSPORT, 0, 2),
      expr.cmp(EQ, Buffer.from([0, 1])),
      expr.payload(TRANSPORT, 2, 2),
      expr.cmp(NEQ, Buffer.from([0, 2])),
    ]);
    expect(rule.spec).toEqual('-p tcp -m tcp --sport 1 ! --dport 2'.split(' '));
  });

  it('leaves a rule it cannot print opaque, with the comment and the target it shows', () => {
    const limit = back([
      expr.match('comment', 0, commentInfo(TAG)),
      { name: 'limit', data: [[1, Buffer.alloc(8)]] },
      expr.counter(),
      expr.verdict(JUMP, 'CNI-0123456789abcdef01234567'),
    ]);
    expect(limit).toEqual({
      handle: 7n,
      spec: undefined,
      comment: TAG,
      target: 'CNI-0123456789abcdef01234567',
    });
    // A port with no protocol before it, a mask that is not a prefix, an xt match not read here.
    expect(
      back([expr.payload(TRANSPORT, 2, 2), expr.cmp(EQ, Buffer.from([0, 80]))]).spec,
    ).toBeUndefined();
    expect(
      back([
        expr.payload(NETWORK, 12, 4),
        expr.bitwise(ip4('255.0.255.0')),
        expr.cmp(EQ, ip4('10.0.1.0')),
      ]).spec,
    ).toBeUndefined();
    expect(back([expr.match('limit', 0, Buffer.alloc(32)), expr.verdict(1)])).toEqual({
      handle: 7n,
      spec: undefined,
      comment: undefined,
      target: 'ACCEPT',
    });
    // A load nothing compares.
    expect(back([expr.payload(NETWORK, 12, 4), expr.verdict(1)]).spec).toBeUndefined();
  });

  it('takes a comment from the rule’s user data, and leaves such a rule opaque', () => {
    const udata = Buffer.concat([Buffer.from([0, TAG.length + 1]), cstring(TAG)]);
    const rule = readBackRule(
      ruleMessage({
        table: 'nat',
        chain: 'POSTROUTING',
        handle: 9n,
        exprs: [expr.counter(), expr.verdict(1)],
        extra: [[7, udata]],
      }),
      'ipv4',
    );
    expect(rule).toEqual({ handle: 9n, spec: undefined, comment: TAG, target: 'ACCEPT' });
  });

  it('throws Malformed for a message nf_tables does not send', () => {
    const whole = ruleMessage({ table: 'nat', chain: 'X', handle: 1n, exprs: [expr.verdict(1)] });
    expect(() => readBackRule(whole.subarray(0, whole.length - 3), 'ipv4')).toThrow(Malformed);
    const noHandle = Buffer.concat([
      Buffer.alloc(4),
      encodeAttributes([
        [1, cstring('nat')],
        [4, be32(0)],
      ]),
    ]);
    expect(() => readBackRule(noHandle, 'ipv4')).toThrow('a rule without its handle');
  });
});

describe('formatIPv6', () => {
  it.each([
    ['00000000000000000000000000000000', '::'],
    ['00000000000000000000000000000001', '::1'],
    ['fd000000000000000000000000000005', 'fd00::5'],
    ['20010db8000000000000000000000000', '2001:db8::'],
    ['00010000000000010000000000000001', '1:0:0:1::1'],
    ['00010000000000010000000000010001', '1::1:0:0:1:1'],
    ['00010000000100000001000000010000', '1:0:1:0:1:0:1:0'],
    ['00000000000000000000ffff01020304', '::ffff:1.2.3.4'],
    ['00000000000000000000000001020304', '::1.2.3.4'],
    ['fe800000000000000001000000000001', 'fe80::1:0:0:1'],
  ])('prints %s as inet_ntop does: %s', (hex, text) => {
    expect(formatIPv6(Buffer.from(hex, 'hex'))).toBe(text);
  });
});
