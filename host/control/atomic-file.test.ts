import { describe, it, expect } from 'vitest';
import { linkSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFileAtomic } from './atomic-file.js';

describe('writeFileAtomic', () => {
  it('replaces the file instead of rewriting it: a reader holding the old file still reads the old content, whole', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-atomic-'));
    const file = join(dir, 'pipeline.json');
    writeFileSync(file, 'old content\n');
    // A second name for the old file, as a reader that opened it before the write holds it.
    const reader = join(dir, 'reader-view');
    linkSync(file, reader);
    const before = statSync(file).ino;
    writeFileAtomic(file, 'new content, longer than the old\n');
    expect(readFileSync(file, 'utf8')).toBe('new content, longer than the old\n');
    expect(readFileSync(reader, 'utf8')).toBe('old content\n');
    expect(statSync(file).ino).not.toBe(before);
  });

  it('leaves no temporary file behind and keeps state files private to their owner', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kwp-atomic-'));
    const file = join(dir, 'sub', 'index.json');
    writeFileAtomic(file, new Uint8Array([1, 2, 3]));
    writeFileAtomic(file, '{}\n');
    expect(readdirSync(join(dir, 'sub'))).toEqual(['index.json']);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });
});
