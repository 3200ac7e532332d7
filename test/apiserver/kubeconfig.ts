// Kubeconfig files pointing at an emulator, so tests drive the agent through
// the same KubeConfig loading path a real cluster would use.

import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';

export interface KubeconfigOptions {
  /** Server URL, e.g. `emulator.url`. */
  server: string;
  /** Bearer token for the user entry. */
  token?: string;
  /** PEM of the CA for an https server (e.g. `testTls().ca`); plain http servers are marked insecure-skip-tls-verify. */
  ca?: string;
  /** Cluster/context/user name; defaults to `kwp-emulator`. */
  name?: string;
  /** Where to write; a fresh temporary directory's `kubeconfig` when absent. */
  file?: string;
}

/** The kubeconfig text. Plain HTTP needs `insecure-skip-tls-verify`: client-node refuses http:// otherwise. */
export function kubeconfigYaml(opts: KubeconfigOptions): string {
  const name = opts.name ?? 'kwp-emulator';
  const cluster = opts.ca
    ? { server: opts.server, 'certificate-authority-data': Buffer.from(opts.ca).toString('base64') }
    : { server: opts.server, 'insecure-skip-tls-verify': true };
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster }],
    users: [{ name, user: opts.token ? { token: opts.token } : {} }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    'current-context': name,
  });
}

/** Writes a kubeconfig file and returns its path. */
export async function writeKubeconfig(opts: KubeconfigOptions): Promise<string> {
  const file = opts.file ?? path.join(await mkdtemp(path.join(tmpdir(), 'kwp-kubeconfig-')), 'kubeconfig');
  await writeFile(file, kubeconfigYaml(opts), { mode: 0o600 });
  return file;
}
