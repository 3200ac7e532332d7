// The agent's state directory (uploaded modules, the active pipeline) must be
// writable before anything starts: a raw EACCES stack from deep inside the
// module store tells a user neither what failed nor what to do.
import { accessSync, constants, mkdirSync } from 'node:fs';
import { KwpError } from '../errors.js';

/** Creates `dir` if needed and checks it is writable; KWP_ERR_STATE_DIR with a hint otherwise. */
export function ensureStateDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    const why = code === 'EACCES' || code === 'EPERM' ? 'permission denied' : code === 'EROFS' ? 'read-only file system' : code === 'ENOTDIR' ? 'a path component is a file' : code;
    throw new KwpError(
      'KWP_ERR_STATE_DIR',
      `--state-dir ${dir}: cannot create or write it (${why}); run as a user who may write there (the default /var/lib/kwp needs root), or pass --state-dir with a directory you own, e.g. --state-dir ./kwp-state`,
      { cause: err },
    );
  }
}
