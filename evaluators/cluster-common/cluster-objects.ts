// The two non-policy kinds the cluster-wide evaluators read: v1/Node (for
// `nodes` peers, which match the addresses in status.addresses) and the host's
// dns.kwp.io/v1/ResolvedName (for `domainNames` peers).

import { JValue, JKind, Labels, NO_LABELS, PodAddress } from "../../sdk/index";
import { parseIP } from "../../sdk/cidr";
import { normalizeDomain } from "./domain-name";

export class NodeEntry {
  name: string = "";
  labels: Labels = NO_LABELS;
  addresses: PodAddress[] = [];

  static parse(obj: JValue): NodeEntry {
    const n = new NodeEntry();
    const meta = obj.get("metadata");
    if (meta != null) {
      n.name = meta.str("name");
      const labels = meta.get("labels");
      if (labels != null && labels.kind == JKind.Object) {
        const keys = labels.objectKeys;
        const ks = new Array<string>(0);
        const vs = new Array<string>(0);
        for (let i = 0; i < keys.length; i++) {
          const v = labels.items![i];
          if (v.kind != JKind.String) continue;
          ks.push(keys[i]);
          vs.push(v.s);
        }
        n.labels = Labels.fromPairs(ks, vs);
      }
    }
    const status = obj.get("status");
    const list = status != null ? status.get("addresses") : null;
    if (list != null) {
      const items = list.array;
      for (let i = 0; i < items.length; i++) {
        // Hostname and InternalDNS entries are names, not addresses: skip them.
        const a = parseIP(items[i].str("address"));
        if (a != null) n.addresses.push(a);
      }
    }
    return n;
  }
}

export class ResolvedName {
  /** Normalised (lower case, no trailing dot). */
  name: string = "";
  addresses: PodAddress[] = [];

  static parse(obj: JValue): ResolvedName {
    const r = new ResolvedName();
    const meta = obj.get("metadata");
    r.name = normalizeDomain(meta != null ? meta.str("name") : "");
    const list = obj.get("addresses");
    if (list != null) {
      const items = list.array;
      for (let i = 0; i < items.length; i++) {
        if (items[i].kind != JKind.String) continue;
        const a = parseIP(items[i].s);
        if (a != null) r.addresses.push(a);
      }
    }
    return r;
  }
}
