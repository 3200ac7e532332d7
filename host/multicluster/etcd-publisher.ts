// Makes the tracker's prefix in etcd say what the watched clusters say. Every
// pass reads the prefix and writes only the difference, all under this
// tracker's lease, so a tracker that dies takes its writes with it after the
// lease's TTL. Several replicas may run this against the same keys: they write
// the same values, a put is skipped when the value is already there, and a key
// that vanishes because another replica's lease ran out is written again on
// the next pass (the tracker runs one as soon as it sees the delete).

import type { Etcd3, Lease } from 'etcd3';
import { openEtcd } from './etcd-client.js';
import { decodeRecord } from './ip-record.js';
import type { HostLogger } from '../logger.js';

/** Puts in flight at once: enough to fill the channel, few enough not to flood etcd after a resync. */
const WRITE_BATCH = 64;

export interface EtcdPublisherOptions {
  endpoints: string[];
  prefix: string;
  leaseTtlSeconds: number;
  logger: HostLogger;
}

export interface PublishPass {
  /** Keys wanted, with their values. */
  desired: ReadonlyMap<string, string>;
  /** Cluster ids whose keys this tracker is the authority on: a key of theirs that is not desired is deleted. */
  authoritative: ReadonlySet<string>;
}

export interface PublishResult {
  put: number;
  deleted: number;
}

export class EtcdPublisher {
  private client: Etcd3 | undefined;
  private lease: Lease | undefined;
  private leaseId: string | undefined;
  /** Leases of ours that ran out: keys still bound to one must be written again under the current lease. */
  private readonly deadLeases = new Set<string>();

  constructor(private readonly opts: EtcdPublisherOptions) {}

  /** One pass; throws when etcd cannot be reached (the caller retries with backoff). */
  async publish(pass: PublishPass): Promise<PublishResult> {
    // Passes run one at a time and close() waits for the running one, so no second client can open meanwhile.
    if (!this.client) this.client = await openEtcd(this.opts.endpoints);
    const client = this.client;
    const leaseId = await this.currentLease(client);
    const listing = await client.getAll().prefix(this.opts.prefix).exec();
    const actual = new Map<string, { value: string; lease: string }>();
    for (const kv of listing.kvs) actual.set(kv.key.toString(), { value: kv.value.toString(), lease: String(kv.lease) });

    let put = 0;
    let deleted = 0;
    const writes: Array<() => Promise<unknown>> = [];
    for (const [key, value] of pass.desired) {
      const have = actual.get(key);
      if (have && have.value === value && !this.deadLeases.has(have.lease)) continue;
      writes.push(() => client.put(key).value(value).lease(leaseId).exec());
    }
    for (let i = 0; i < writes.length; i += WRITE_BATCH) {
      await Promise.all(writes.slice(i, i + WRITE_BATCH).map((w) => w()));
    }
    put = writes.length;
    for (const [key, have] of actual) {
      if (pass.desired.has(key)) continue;
      const decoded = decodeRecord(this.opts.prefix, key, have.value);
      if (!decoded.ok || !pass.authoritative.has(decoded.record.clusterId)) continue;
      // Only if nobody rewrote it since the listing: a put by a replica that
      // has newer news than this pass must not be undone by it.
      const result = await client.if(key, 'Mod', '<', String(BigInt(listing.header.revision) + 1n)).then(client.delete().key(key)).commit();
      if (result.succeeded) deleted++;
    }
    return { put, deleted };
  }

  private async currentLease(client: Etcd3): Promise<string> {
    if (this.lease && this.leaseId && !this.lease.revoked()) return this.leaseId;
    const lease = client.lease(this.opts.leaseTtlSeconds);
    lease.on('lost', (err) => {
      if (this.lease !== lease) return;
      if (this.leaseId) this.deadLeases.add(this.leaseId);
      this.opts.logger.warn({ lease: this.leaseId, err: (err as Error)?.message }, 'etcd lease lost; the next pass writes every record under a new lease');
      this.lease = undefined;
      this.leaseId = undefined;
    });
    let id: string;
    try {
      id = await lease.grant();
    } catch (err) {
      lease.removeAllListeners('lost');
      throw err;
    }
    this.lease = lease;
    this.leaseId = id;
    return id;
  }

  /** Stops keeping the lease alive without revoking it: the records outlive this process by one TTL, so a restart does not flap them. */
  close(): void {
    this.lease?.release();
    this.lease = undefined;
    this.leaseId = undefined;
    try {
      this.client?.close();
    } catch {
      // already closed
    }
    this.client = undefined;
  }
}
