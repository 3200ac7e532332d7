// One way to open etcd for the tracker and the agent. etcd3's default fault
// handling retries three times and then opens a five-second circuit breaker
// per host; both callers here run their own reconnect loop with backoff (and
// must notice a dead etcd promptly to keep serving the last known state), so
// every call goes straight through and its failure reaches the caller.
//
// etcd3 (with gRPC, about 28 MiB of a process once loaded) is imported when
// the first client opens: only the IP tracker and agents in multicluster mode
// talk to etcd, and the public API that names these functions is loaded by
// every agent.

import type { Etcd3, IOptions } from 'etcd3';
import { KwpError } from '../errors.js';

/** A pass-through policy with the shape etcd3 expects from cockatiel. */
const passThrough = {
  _altReturn: undefined as never,
  onSuccess: () => ({ dispose() {} }),
  onFailure: () => ({ dispose() {} }),
  execute<T>(fn: (context: { signal: AbortSignal }) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
    return Promise.resolve().then(() => fn({ signal: signal ?? new AbortController().signal }));
  },
};

/** `http://host:port[,http://host:port...]` as the `--etcd` flag spells it. */
export function parseEtcdEndpoints(text: string, flag: string): string[] {
  const endpoints = text.split(',').map((s) => s.trim()).filter(Boolean);
  if (endpoints.length === 0) throw new KwpError('KWP_ERR_USAGE', `${flag} needs at least one etcd URL, e.g. http://127.0.0.1:2379`);
  for (const e of endpoints) {
    let url: URL;
    try {
      url = new URL(e);
    } catch {
      throw new KwpError('KWP_ERR_USAGE', `${flag}: "${e}" is not a URL; write it as http://HOST:PORT`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new KwpError('KWP_ERR_USAGE', `${flag}: "${e}" must start with http:// or https://`);
    }
  }
  return endpoints;
}

export async function openEtcd(endpoints: string[], extra: Partial<IOptions> = {}): Promise<Etcd3> {
  const { Etcd3 } = await import('etcd3');
  return new Etcd3({
    hosts: endpoints,
    dialTimeout: 3000,
    faultHandling: { host: () => passThrough as any, global: passThrough as any },
    ...extra,
  });
}
