// Metrics for input the agent refuses, read when Prometheus scrapes:
//
//   kwp_source_refused{source,code,file}      1 for each file a source refuses right now
//                                            (it keeps delivering the last good state)
//   kwp_source_rejected_total{source,code}    inputs a source refused since the agent started
//
// Files only reach these metrics while they are refused, so the number of
// series stays that of the broken files, not of every file ever read.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ObjectSource } from '../contract.js';

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
