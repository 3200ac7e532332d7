// kwp_fleet_* metrics, registered in the agent's own metrics registry (the
// one /metrics serves), so a node's fleet behaviour is scraped with the rest.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export class FleetMetrics {
  /** Module bytes fetched (or found in the cache), by source (oci, configmap, secret, cache) and outcome (fetched or the error code). */
  readonly fetches: Counter<'source' | 'outcome'>;
  /** Modules refused after fetching: digest mismatch, bad or missing signature, failed validation; by error code. */
  readonly verificationFailures: Counter<'code'>;
  /** From first seeing a Pipeline generation this node is admitted to, to running it. */
  readonly convergenceSeconds: Histogram;
  readonly statusWrites: Counter<'outcome'>;
  readonly appliedGeneration: Gauge;

  constructor(registry?: Registry) {
    const registers = registry ? [registry] : [];
    this.fetches = new Counter({ name: 'kwp_fleet_module_fetches_total', help: 'EvaluatorModule bytes fetched, by source (oci, configmap, secret, cache) and outcome (fetched, cached, or the error code).', labelNames: ['source', 'outcome'], registers });
    this.verificationFailures = new Counter({ name: 'kwp_fleet_verification_failures_total', help: 'Fetched modules refused: digest mismatch, signature, or the upload validation chain; by error code.', labelNames: ['code'], registers });
    this.convergenceSeconds = new Histogram({
      name: 'kwp_fleet_convergence_seconds', help: 'Time from first seeing a Pipeline generation this node is admitted to until it runs it (fetch, validation, build, swap).', registers,
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
    });
    this.statusWrites = new Counter({ name: 'kwp_fleet_status_writes_total', help: 'Writes of this node\'s NodePipelineStatus, by outcome (ok or failed).', labelNames: ['outcome'], registers });
    this.appliedGeneration = new Gauge({ name: 'kwp_fleet_applied_generation', help: 'Generation of the cluster Pipeline this node runs; 0 while it runs its configured pipeline.', registers });
  }
}
