import { describe, it, expect } from 'vitest';
import { StaticJudge } from './static-judge.js';
import { parsePacket } from './packet-parser.js';
import { buildPacket } from './packet-builder.js';

const packet = (src: string, dst: string, protocol: number, dstPort: number) => parsePacket(buildPacket({ src, dst, protocol, srcPort: 1000, dstPort }))!;

describe('StaticJudge', () => {
  const judge = new StaticJudge({ deny: [{ src: '10.0.0.1', dst: '10.0.0.2', protocol: 6, port: 80 }, { dst: 'fd00::9' }], interest: { all: true, ips: [] } });

  it.each([
    ['the exact denied flow', packet('10.0.0.1', '10.0.0.2', 6, 80), false],
    ['another port of the same pair', packet('10.0.0.1', '10.0.0.2', 6, 81), true],
    ['the same pair over UDP', packet('10.0.0.1', '10.0.0.2', 17, 80), true],
    ['the reverse direction', packet('10.0.0.2', '10.0.0.1', 6, 80), true],
    ['anything to a wildcard-denied destination', packet('fd00::1', 'fd00::9', 17, 53), false],
  ])('decides %s', (_name, p, expected) => {
    expect(judge.allows(p)).toBe(expected);
  });

  it('takes new rules on update', () => {
    const j = new StaticJudge({ deny: [], interest: { all: false, ips: ['10.0.0.1'] } });
    expect(j.allows(packet('10.0.0.1', '10.0.0.2', 6, 80))).toBe(true);
    j.update({ deny: [{ src: '10.0.0.1' }], interest: { all: false, ips: [] } });
    expect(j.allows(packet('10.0.0.1', '10.0.0.2', 6, 80))).toBe(false);
    expect(j.interest().ips).toEqual([]);
  });
});
