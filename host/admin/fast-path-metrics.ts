// Metrics of the kernel fast path (host/dataplane/fast-path.ts), read when
// Prometheus scrapes:
//
//   kwp_fastpath_on                          1 while decided tuples are kept, 0 while not (reason label)
//   kwp_fastpath_entries_added_total{verdict} distinct tuples written to the kernel sets
//   kwp_fastpath_batches_total               fill scripts run (ipset restore / nft -f)
//   kwp_fastpath_fill_errors_total           fills the kernel refused (a full set, say)
//   kwp_fastpath_overflow_total              decided tuples not kept: too many were waiting
//   kwp_fastpath_invalidations_total{cause}  invalidations (every one, coalesced or not)
//   kwp_fastpath_flushes_total               invalidations that emptied the sets in the kernel
//   kwp_fastpath_fill_lag_micros{quantile}   from a decision to the end of the fill that wrote it
//   kwp_fastpath_kernel_decided_total{verdict} first packets the kernel decided through the sets
//                                            (rule counters; these connections never reach the
//                                            agent, so flow records and kwp_dataplane_* miss them)
import { Counter, Gauge, type Registry } from 'prom-client';
import { INVALIDATION_CAUSES, type FastPath } from '../dataplane/fast-path.js';

/** `fastPath` returns undefined while there is none (no dataplane yet, or the fast path is off). */
export function registerFastPathMetrics(registry: Registry, fastPath: () => FastPath | undefined): void {
  const registers = [registry];
  const monotonic = (name: string, help: string, labelNames: string[], read: (fp: FastPath) => Array<[Record<string, string>, number]>) => {
    new Counter({
      name, help, labelNames, registers,
      collect() {
        const fp = fastPath();
        if (!fp) return;
        this.reset();
        for (const [labels, value] of read(fp)) this.inc(labels, value);
      },
    });
  };
  new Gauge({
    name: 'kwp_fastpath_on', help: '1 while the kernel fast path keeps decided tuples, 0 while it does not (reason says why).',
    labelNames: ['reason'], registers,
    collect() {
      this.reset();
      const fp = fastPath();
      const reason = fp ? fp.blocker : 'off (kwp agent --fast-path=false or no dataplane)';
      this.set({ reason: reason ?? '' }, reason === undefined ? 1 : 0);
    },
  });
  monotonic('kwp_fastpath_entries_added_total', 'Distinct decided tuples written to the kernel fast path sets, by verdict.', ['verdict'],
    (fp) => [[{ verdict: 'accept' }, fp.counters.added.accept], [{ verdict: 'deny' }, fp.counters.added.deny]]);
  monotonic('kwp_fastpath_batches_total', 'Fill scripts run against the kernel fast path sets (ipset restore or nft -f).', [], (fp) => [[{}, fp.counters.batches]]);
  monotonic('kwp_fastpath_fill_errors_total', 'Fills of the kernel fast path sets the kernel refused; their tuples stay with the agent.', [], (fp) => [[{}, fp.counters.fillErrors]]);
  monotonic('kwp_fastpath_overflow_total', 'Decided tuples not kept because too many were waiting for a fill.', [], (fp) => [[{}, fp.counters.overflow]]);
  monotonic('kwp_fastpath_invalidations_total', 'Invalidations of the kernel fast path sets, by cause.', ['cause'],
    (fp) => INVALIDATION_CAUSES.map((cause) => [{ cause }, fp.counters.invalidations[cause]]));
  monotonic('kwp_fastpath_flushes_total', 'Invalidations that emptied the kernel fast path sets in the kernel (coalesced ones share one).', [], (fp) => [[{}, fp.counters.flushes]]);
  new Gauge({
    name: 'kwp_fastpath_fill_lag_micros', help: 'From a decision to the end of the fill that put its tuple in the kernel sets, percentiles over the agent\'s life, in microseconds.',
    labelNames: ['quantile'], registers,
    collect() {
      const fp = fastPath();
      if (!fp) return;
      this.set({ quantile: '0.5' }, fp.fillLagMicros.p50());
      this.set({ quantile: '0.99' }, fp.fillLagMicros.p99());
    },
  });
  new Counter({
    name: 'kwp_fastpath_kernel_decided_total',
    help: 'First packets of connections the kernel accepted or dropped through the fast path sets, without the agent (rule counters): flow records and kwp_dataplane_* counters do not include them.',
    labelNames: ['verdict'], registers,
    async collect() {
      const fp = fastPath();
      if (!fp) return;
      const counts = await fp.kernelDecided().catch(() => undefined);
      if (!counts) return;
      this.reset();
      this.inc({ verdict: 'accept' }, counts.accept);
      this.inc({ verdict: 'deny' }, counts.deny);
    },
  });
}
