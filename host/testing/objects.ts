// Small builders for the Kubernetes objects plugin tests need most, so a test
// can state its cluster in a few lines instead of a YAML file. They produce
// exactly what a manifest file or the API server would deliver.
import type { KubeObject } from '../contract.js';

function splitRef(ref: string, what: string): { namespace: string; name: string } {
  const parts = ref.split('/');
  if (parts.length !== 2 || !parts[0] || !parts[1]) {
    throw new Error(`${what} "${ref}": write it as "namespace/name"`);
  }
  return { namespace: parts[0], name: parts[1] };
}

/** A Namespace; `kubernetes.io/metadata.name` is added as the API server would. */
export function namespace(name: string, labels: Record<string, string> = {}): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name, labels: { 'kubernetes.io/metadata.name': name, ...labels } },
  };
}

export interface PodOptions {
  labels?: Record<string, string>;
  /** Container ports, for named-port rules: `{ name: 'http', port: 8080 }` (protocol defaults to TCP). */
  ports?: Array<{ name?: string; port: number; protocol?: 'TCP' | 'UDP' | 'SCTP' }>;
  nodeName?: string;
  hostNetwork?: boolean;
}

/**
 * A running Pod at `ip` (one address, or several for dual-stack). Its
 * namespace must exist too, or the pod has no namespace labels.
 */
export function pod(ref: string, ip: string | string[], options: PodOptions = {}): KubeObject {
  const { namespace: ns, name } = splitRef(ref, 'pod');
  const ips = Array.isArray(ip) ? ip : [ip];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: { ...(options.labels ?? {}) } },
    spec: {
      nodeName: options.nodeName ?? 'node-1',
      hostNetwork: options.hostNetwork ?? false,
      containers: [{
        name: 'main',
        ports: (options.ports ?? []).map((p) => ({ ...(p.name ? { name: p.name } : {}), containerPort: p.port, protocol: p.protocol ?? 'TCP' })),
      }],
    },
    status: { phase: 'Running', podIP: ips[0], podIPs: ips.map((a) => ({ ip: a })) },
  };
}

/** A Service selecting pods by `selector` (`null` for a Service without a selector). */
export function service(
  ref: string,
  selector: Record<string, string> | null,
  ports: Array<{ name?: string; port: number; targetPort?: number | string; protocol?: 'TCP' | 'UDP' | 'SCTP' }> = [],
): KubeObject {
  const { namespace: ns, name } = splitRef(ref, 'service');
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: ns },
    spec: {
      ...(selector ? { selector } : {}),
      ports: ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), port: p.port, targetPort: p.targetPort ?? p.port, protocol: p.protocol ?? 'TCP' })),
    },
  };
}
