// Metrics for input the agent refuses, read when Prometheus scrapes:
//
//   kwp_source_refused{source,code,file}      1 for each file a source refuses right now
//                                            (it keeps delivering the last good state)
//   kwp_source_rejected_total{source,code}    inputs a source refused since the agent started
//   kwp_objects_rejected{stage,module,kind}   objects a stage's module refused when it took
//                                            them (from an API server too, which validated them
//                                            already), until they change or go
//
// Files only reach these metrics while they are refused, so the number of
// series stays that of the broken files, not of every file ever read.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ObjectSource } from '../contract.js';
import type { ClusterState } from '../state/cluster-state.js';
import type { Stage } from '../pipeline/stage.js';

export function registerSourceMetrics(registry: Registry, sources: () => readonly ObjectSource[]): void {
  const registers = [registry];
  new Gauge({
    name: 'kwp_source_refused',
    help: 'Files a source refuses right now (1 each), by source, error code and file; the source keeps delivering its last good state.',
    labelNames: ['source', 'code', 'file'], registers,
    collect() {
      this.reset();
      for (const s of sources()) {
        const r = s.refusal?.();
        if (!r) continue;
        for (const file of r.files.length ? r.files : ['']) this.set({ source: r.source, code: r.code, file }, 1);
      }
    },
  });
  new Counter({
    name: 'kwp_source_rejected_total',
    help: 'Inputs a source refused since the agent started (a manifest re-read that did not validate), by source and error code.',
    labelNames: ['source', 'code'], registers,
    collect() {
      this.reset();
      for (const s of sources()) for (const [code, n] of s.refusedLoads ?? []) this.inc({ source: s.name, code }, n);
    },
  });
}

/** `stages`: those of the active pipeline. */
export function registerObjectRejectionMetrics(registry: Registry, stages: () => readonly Stage[]): void {
  new Gauge({
    name: 'kwp_objects_rejected',
    help: "Objects the stage's module refused or warned about when it took them, by stage, module and kind; the agent's log names each (its \"rejected\" field).",
    labelNames: ['stage', 'module', 'kind'], registers: [registry],
    collect() {
      this.reset();
      for (const s of stages()) for (const [kind, n] of s.rejectedObjects.countsByKind()) this.set({ stage: s.name, module: s.compiled.meta.name, kind }, n);
    },
  });
}

/**
 * `kwp_cluster_state_replaces_total{kind}`: lists the cluster state took
 * whole, per kind (a source's first list, and each relist), counted once
 * installed; `kwp_cluster_state_list_pending` is 1 while one is taken in slices.
 */
export function registerClusterStateMetrics(registry: Registry, state: ClusterState): void {
  const registers = [registry];
  new Counter({
    name: 'kwp_cluster_state_replaces_total',
    help: 'Full lists of a kind the cluster state installed (a source\'s first list and each relist), by kind.',
    labelNames: ['kind'], registers,
    collect() {
      this.reset();
      for (const [kind, n] of state.replaceCounts) this.inc({ kind }, n);
    },
  });
  new Gauge({
    name: 'kwp_cluster_state_list_pending',
    help: '1 while the cluster state takes a large list in slices (the stages answer with the state before it meanwhile), by kind.',
    labelNames: ['kind'], registers,
    collect() {
      this.reset();
      const list = state.pendingList;
      if (list) this.set({ kind: list.kind }, 1);
    },
  });
}
