import { describe, it, expect } from 'vitest';
import { compareVersions } from './versions.js';

describe('module versions order the way people read them', () => {
  const ascending: Array<[string, string]> = [
    ['1.9.0', '1.10.0'],
    ['1.0.0-rc.1', '1.0.0'],
    ['1.0.0-rc.2', '1.0.0-rc.10'],
    ['1.0', '1.0.1'],
    ['0.9.9', '1.0.0'],
    ['1.0.0-alpha', '1.0.0-beta'],
  ];
  it.each(ascending)('%s comes before %s', (older, newer) => {
    expect(compareVersions(older, newer)).toBe(-1);
    expect(compareVersions(newer, older)).toBe(1);
  });

  it('build metadata does not order versions', () => {
    expect(compareVersions('1.2.3+build.7', '1.2.3+build.9')).toBe(0);
  });
});
