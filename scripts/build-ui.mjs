// Copies the web console (host/admin/ui: plain ES modules, CSS and HTML, no
// build step and no dependencies) next to the compiled admin routes, to
// dist/host/admin/ui, which the package's "files" ships. Test files stay behind.
import { cpSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const from = join(root, 'host', 'admin', 'ui');
const to = join(root, 'dist', 'host', 'admin', 'ui');
rmSync(to, { recursive: true, force: true });
cpSync(from, to, { recursive: true, filter: (src) => !src.endsWith('.ts') });
