import { describe, it, expect } from 'vitest';
import { mkdtemp, mkdir, rm, symlink, unlink, writeFile, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KubeconfigDirectory } from './kubeconfig-directory.js';

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'kwp-kcdir-'));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function recorder(dir: string): { events: string[]; directory: KubeconfigDirectory } {
  const events: string[] = [];
  const directory = new KubeconfigDirectory(dir, {
    added: (e) => events.push(`added ${path.basename(e.file)} ${e.text}`),
    changed: (e) => events.push(`changed ${path.basename(e.file)} ${e.text}`),
    removed: (f) => events.push(`removed ${path.basename(f)}`),
    unreadable: () => events.push('unreadable'),
  }, 60_000);
  return { events, directory };
}

describe('KubeconfigDirectory', () => {
  it('reports files added, changed and removed between scans, and nothing when nothing changed', async () => {
    await withDir(async (dir) => {
      const { events, directory } = recorder(dir);
      await writeFile(path.join(dir, 'east'), 'e1');
      await directory.scan();
      await directory.scan();
      await writeFile(path.join(dir, 'east'), 'e2');
      await writeFile(path.join(dir, 'west'), 'w1');
      await directory.scan();
      await unlink(path.join(dir, 'east'));
      await directory.scan();
      expect(events).toEqual(['added east e1', 'changed east e2', 'added west w1', 'removed east']);
    });
  });

  it('follows a Secret volume: dot entries are skipped and a swapped ..data symlink reads as a change', async () => {
    await withDir(async (dir) => {
      const { events, directory } = recorder(dir);
      await mkdir(path.join(dir, '..v1'));
      await writeFile(path.join(dir, '..v1', 'east'), 'one');
      await symlink('..v1', path.join(dir, '..data'));
      await symlink('..data/east', path.join(dir, 'east'));
      await directory.scan();
      await mkdir(path.join(dir, '..v2'));
      await writeFile(path.join(dir, '..v2', 'east'), 'two');
      await symlink('..v2', path.join(dir, '..data.tmp'));
      await rename(path.join(dir, '..data.tmp'), path.join(dir, '..data'));
      await directory.scan();
      expect(events).toEqual(['added east one', 'changed east two']);
    });
  });

  it('keeps the last known files when the directory cannot be read', async () => {
    await withDir(async (dir) => {
      const inner = path.join(dir, 'clusters');
      await mkdir(inner);
      await writeFile(path.join(inner, 'east'), 'e');
      const { events, directory } = recorder(inner);
      await directory.scan();
      await rm(inner, { recursive: true });
      await directory.scan();
      expect(events).toEqual(['added east e', 'unreadable']);
      expect(directory.files().map((f) => path.basename(f))).toEqual(['east']);
    });
  });
});
