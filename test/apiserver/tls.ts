// The emulator's test TLS material (see tls/README.md), for suites that want
// the agent to talk HTTPS with a CA the way it does inside a cluster.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface TestTls {
  /** PEM of the CA that signed the server certificate. */
  ca: string;
  cert: string;
  key: string;
}

export function testTls(): TestTls {
  const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'tls');
  const read = (f: string) => readFileSync(path.join(dir, f), 'utf8');
  return { ca: read('ca.crt'), cert: read('server.crt'), key: read('server.key') };
}
