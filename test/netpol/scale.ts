// A large synthetic cluster for throughput measurements: `namespaces` x
// `podsPerNamespace` pods and `policiesPerNamespace` NetworkPolicies in each
// namespace, built deterministically so runs compare.
import type { KubeObject } from '../../host/contract.js';
import { namespace, pod, networkPolicy, type PolicySpec } from './cluster.js';

export interface ScaleOptions {
  namespaces: number;
  podsPerNamespace: number;
  policiesPerNamespace: number;
}

export const APPS = 10;
export const TEAMS = 5;

export function scalePodIP(ns: number, i: number): string {
  return `10.${ns >> 8}.${ns & 0xff}.${i + 1}`;
}

/**
 * Namespace n-<i> is labelled team=t-<i % TEAMS>; pod p-<j> app=app-<j % APPS>.
 * Policy 0 of each even namespace denies all ingress; the others each select one
 * app and allow it ingress from another app of the same team's namespaces on
 * port 80 or the named port serve-81-tcp, from a CIDR, and egress to one team.
 */
export function scaleCluster(o: ScaleOptions): KubeObject[] {
  const objects: KubeObject[] = [];
  for (let n = 0; n < o.namespaces; n++) {
    const ns = `n-${n}`;
    objects.push(namespace(ns, { team: `t-${n % TEAMS}` }));
    for (let j = 0; j < o.podsPerNamespace; j++) {
      objects.push(pod(ns, `p-${j}`, { labels: { app: `app-${j % APPS}`, pod: `p-${j}` }, ip: scalePodIP(n, j) }));
    }
    for (let k = 0; k < o.policiesPerNamespace; k++) {
      let spec: PolicySpec;
      // Odd namespaces have no default deny, so pods of app-0 there are not isolated at all.
      if (k === 0 && n % 2 === 1) continue;
      if (k === 0) spec = { podSelector: {}, policyTypes: ['Ingress'] };
      else {
        const app = `app-${k % APPS}`;
        const from = `app-${(k + 1) % APPS}`;
        spec = {
          podSelector: { matchLabels: { app } },
          ingress: [
            { from: [{ namespaceSelector: { matchLabels: { team: `t-${n % TEAMS}` } }, podSelector: { matchLabels: { app: from } } }], ports: [{ port: 80 }, { port: 'serve-81-tcp' }] },
            { from: [{ ipBlock: { cidr: `10.0.${(n + 1) & 0xff}.0/24`, except: [`10.0.${(n + 1) & 0xff}.1/32`] } }] },
          ],
          egress: k % 3 === 0 ? [{ to: [{ namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'In', values: [`t-${(n + 1) % TEAMS}`, `t-${n % TEAMS}`] }] } }] }] : undefined,
        };
      }
      objects.push(networkPolicy(ns, `np-${k}`, spec));
    }
  }
  return objects;
}

/** A small deterministic generator (mulberry32) for picking flows. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
