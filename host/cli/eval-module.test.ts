// `kwp eval --module`: a pipeline may name a plugin that is given as a file
// rather than stored in an agent. The compiled CLI (npm run build first).
import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('kwp eval --module', () => {
  it('lets a pipeline name a plugin given as a file', () => {
    const pipeline = join(root, 'test', 'fixtures', 'pipelines', 'deny-81-then-np.yaml');
    const args = ['bin/kwp.js', 'eval', '--manifests', 'examples/basic/manifests', '--flows', 'examples/basic/flows.json', '--pipeline', pipeline];
    expect(() => execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8', stdio: 'pipe' })).toThrowError(/KWP_ERR_MODULE_NOT_FOUND/);
    const stdout = execFileSync(process.execPath, [...args, '--module', 'dist/wasm/examples/deny-ports.wasm'], { cwd: root, encoding: 'utf8' });
    expect(stdout.split('\n')[1]).toBe('x/a -> y/a TCP/81  DENY  egress: [PORTS] Deny (TCP/81 is denied cluster-wide)  ingress: [PORTS] Deny (TCP/81 is denied cluster-wide)');
  });
});
