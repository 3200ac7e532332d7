// The tracker's list of clusters is a directory of kubeconfig files (a mounted
// Secret in a cluster). Kubelet updates a Secret volume by swapping a symlink,
// which inotify-based watching misses or reports in odd ways, so the directory
// is polled: cheap for a handful of small files, and correct for both a
// Secret mount and a plain directory edited by hand.

import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';

export interface KubeconfigFile {
  /** Absolute path. */
  file: string;
  text: string;
}

export interface KubeconfigDirectoryEvents {
  added(entry: KubeconfigFile): void;
  changed(entry: KubeconfigFile): void;
  removed(file: string): void;
  /** A directory that cannot be read keeps its last known files; the tracker logs this. */
  unreadable?(dir: string, err: Error): void;
}

export class KubeconfigDirectory {
  private readonly hashes = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private scanning: Promise<void> | undefined;

  constructor(
    readonly dir: string,
    private readonly events: KubeconfigDirectoryEvents,
    private readonly pollMs = 1000,
  ) {}

  /** Scans once (so the first clusters start at once), then keeps polling. */
  async start(): Promise<void> {
    await this.scan();
    this.timer = setInterval(() => { void this.scan(); }, this.pollMs);
    this.timer.unref?.();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  files(): string[] {
    return [...this.hashes.keys()].sort();
  }

  /** One pass; overlapping calls share the pass in flight. */
  scan(): Promise<void> {
    if (!this.scanning) this.scanning = this.scanOnce().finally(() => { this.scanning = undefined; });
    return this.scanning;
  }

  private async scanOnce(): Promise<void> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      this.events.unreadable?.(this.dir, err as Error);
      return;
    }
    const seen = new Set<string>();
    // Dot files are a Secret volume's bookkeeping (`..data`, `..2024_...`), not clusters.
    for (const name of names.filter((n) => !n.startsWith('.')).sort()) {
      const file = path.resolve(this.dir, name);
      let text: string;
      try {
        if (!(await stat(file)).isFile()) continue;
        text = await readFile(file, 'utf8');
      } catch {
        continue; // removed between readdir and read: the next pass sees it gone
      }
      seen.add(file);
      const hash = createHash('sha256').update(text).digest('hex');
      const known = this.hashes.get(file);
      if (known === hash) continue;
      this.hashes.set(file, hash);
      if (known === undefined) this.events.added({ file, text });
      else this.events.changed({ file, text });
    }
    for (const file of [...this.hashes.keys()]) {
      if (seen.has(file)) continue;
      this.hashes.delete(file);
      this.events.removed(file);
    }
  }
}
