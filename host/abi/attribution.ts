// Rule attribution (sdk/ABI.md, "Attribution", ABI 1.3): what the optional
// export kwp_attribution puts in the result buffer for a record's (reason,
// rule) pair, checked field by field because it is the module's output.
// Modules of ABI 1.0–1.2 have no rule code and no export: their attribution
// is their reason text as the policy, with no rule.

/** Which policy and rule decided, as the module names them. */
export interface Attribution {
  /** `namespace/name`, or a cluster-scoped policy's name. */
  policy: string;
  /** The rule's name, or `ingress rule N` / `egress rule N`; "" when the module does not say. */
  rule: string;
  /** The peer clause that matched, e.g. `namespaceSelector team=frontend + podSelector app=web`. */
  peer?: string;
  /** The port clause that matched, e.g. `http`, `TCP/8080`. */
  port?: string;
}

/** The fields of kwp_attribution's JSON object, in the order sdk/ABI.md lists them. */
export const ATTRIBUTION_FIELDS = ['policy', 'rule', 'peer', 'port'] as const;

/**
 * Parses kwp_attribution's text. Returns undefined for anything that is not
 * a JSON object whose fields are strings: a module's malformed output costs
 * the attribution, never the decision.
 */
export function parseAttribution(text: string): Attribution | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  for (const f of ATTRIBUTION_FIELDS) if (o[f] !== undefined && typeof o[f] !== 'string') return undefined;
  if (typeof o.policy !== 'string' || o.policy === '') return undefined;
  const out: Attribution = { policy: o.policy, rule: typeof o.rule === 'string' ? o.rule : '' };
  if (typeof o.peer === 'string' && o.peer !== '') out.peer = o.peer;
  if (typeof o.port === 'string' && o.port !== '') out.port = o.port;
  return out;
}

/**
 * What a walkthrough adds after a stage's reason text: `, ingress rule 0:
 * namespaceSelector team=frontend + podSelector app=web, port http` when the
 * reason names the policy and nothing more (NetworkPolicy's Accept). Nothing
 * when the reason says more than the policy (the tiered evaluators' reasons
 * are rule names and tie notes) or for a rule nothing matched in (a default deny,
 * whose reason already lists the isolating policies): the full attribution
 * is in the trace's `attribution` and in flow records either way.
 */
export function attributionDetail(a: Attribution, reasonText: string): string {
  if (!a.rule || reasonText !== a.policy || (!a.peer && !a.port)) return '';
  let out = `, ${a.rule}`;
  if (a.peer) out += `: ${a.peer}`;
  // "any port" reads as it is; a port clause reads "port http".
  if (a.port) out += a.port.startsWith('any ') ? `, ${a.port}` : `, port ${a.port}`;
  return out;
}
