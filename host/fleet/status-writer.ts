// Writes one node's NodePipelineStatus. The node is the only writer of its
// object, so writes replace it unconditionally (no resourceVersion, no
// conflicts however many nodes there are); an unchanged report is not
// written again, and reports that arrive while a write is in flight collapse
// into one. A failed write (API server away) is retried, and the node keeps
// running whatever it runs.
import type { KubeConfig } from '@kubernetes/client-node';
import { requestJson } from '../sources/kubernetes/request.js';
import { NODE_PIPELINE_STATUS, fleetPath, nodeStatusObject, type NodeReport } from './objects.js';
import type { FleetMetrics } from './metrics.js';
import type { HostLogger } from '../logger.js';

export interface StatusWriterOptions {
  kubeConfig: KubeConfig;
  nodeName: string;
  logger: HostLogger;
  metrics?: FleetMetrics;
  retryMs?: number;
}

export class StatusWriter {
  private written = '';
  private pending: NodeReport | undefined;
  private inFlight: Promise<void> | undefined;
  private failing = false;
  private retryTimer: NodeJS.Timeout | undefined;
  /** Writes made, for the simulation's load figures. */
  writes = 0;

  constructor(private readonly options: StatusWriterOptions) {}

  write(report: NodeReport): void {
    this.pending = report;
    if (this.inFlight) return;
    // drain() may finish without awaiting (nothing new to write); clearing in a callback keeps it from clearing before it is set.
    this.inFlight = this.drain().finally(() => {
      this.inFlight = undefined;
      if (this.pending && !this.retryTimer) this.write(this.pending);
    });
  }

  /** Resolves once no write is in flight. */
  async idle(): Promise<void> {
    clearTimeout(this.retryTimer);
    await this.inFlight;
  }

  private async drain(): Promise<void> {
    while (this.pending) {
      const report = this.pending;
      this.pending = undefined;
      const text = JSON.stringify(report);
      if (text === this.written) continue;
      try {
        await this.put(report);
        this.written = text;
        this.writes++;
        this.options.metrics?.statusWrites.inc({ outcome: 'ok' });
        if (this.failing) this.options.logger.info({ node: this.options.nodeName }, 'fleet: status written again');
        this.failing = false;
      } catch (err) {
        this.options.metrics?.statusWrites.inc({ outcome: 'failed' });
        // 404 on the collection: the CRD is not installed (a cluster without the fleet); check again now and then.
        const missing = (err as { statusCode?: number }).statusCode === 404;
        if (!this.failing) {
          const fields = { node: this.options.nodeName, err: (err as Error).message };
          if (missing) this.options.logger.info(fields, 'fleet: the NodePipelineStatus CRD is not installed (kwp manifests installs it); not reporting status');
          else this.options.logger.warn(fields, 'fleet: cannot write this node\'s NodePipelineStatus; retrying');
        }
        this.failing = true;
        this.pending ??= report;
        clearTimeout(this.retryTimer);
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined;
          this.write(this.pending ?? report);
        }, missing ? 30_000 : this.options.retryMs ?? 2000);
        this.retryTimer.unref();
        break;
      }
    }
  }

  private async put(report: NodeReport): Promise<void> {
    const kc = this.options.kubeConfig;
    const body = nodeStatusObject(report);
    try {
      await requestJson(kc, 'PUT', fleetPath(NODE_PIPELINE_STATUS, this.options.nodeName), { body, timeoutMs: 15_000 });
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode !== 404) throw err;
      await requestJson(kc, 'POST', fleetPath(NODE_PIPELINE_STATUS), { body, timeoutMs: 15_000 });
    }
  }
}
