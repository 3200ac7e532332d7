// The kube-wasm-policies package this kwp runs from (a checkout or an
// installed package): its templates, schemas and version live there.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KwpError } from './errors.js';

let root: string | undefined;

export function packageRoot(): string {
  if (root) return root;
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file) && JSON.parse(readFileSync(file, 'utf8')).name === 'kube-wasm-policies') return (root = dir);
  }
  throw new KwpError('KWP_ERR_INTERNAL', 'cannot find the kube-wasm-policies package.json above this command; reinstall kwp');
}
