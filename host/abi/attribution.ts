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
 * The matched clauses of a rule as one phrase: `namespaceSelector team=frontend
 * + podSelector app=web, port http`, `any peer, port TCP/8080`, `networks
 * 10.0.0.0/8, any port`. "" when the attribution names neither. `skip` is
 * text already shown beside it: a clause it contains is not repeated (a
 * tiered rule that fails closed says why in its reason and as its peer).
 */
export function matchedClauses(a: Attribution, skip = ''): string {
  const parts: string[] = [];
  if (a.peer && !skip.includes(a.peer)) parts.push(a.peer);
  // "any port" reads as it is; a port clause reads "port http".
  if (a.port && !skip.includes(a.port)) parts.push(a.port.startsWith('any ') ? a.port : `port ${a.port}`);
  return parts.join(', ');
}

/**
 * A step's text in a walkthrough: the module's reason text with the rule and
 * the peer and port that matched put in after what the reason names first.
 * - A reason that is the policy (NetworkPolicy's Accept): `y/allow-web,
 *   ingress rule 0: namespaceSelector team=frontend + podSelector app=web, port http`.
 * - A reason that starts with the rule (a tiered rule's name, `pass-81`, or
 *   `policy, ingress rule 0` for an unnamed one) and may go on with a note
 *   (`; note: ...`, ` (fails closed: ...)`): the policy goes first, as a
 *   NetworkPolicy step names it: `admin-guardrails, pass-81: namespaces all,
 *   port TCP/81; note: ...`.
 * Otherwise, or for a rule nothing matched in (a default deny, whose reason
 * already lists the isolating policies), the reason text as it is: the full
 * attribution is in the trace's `attribution` and in flow records either way.
 */
export function attributedReason(a: Attribution, reasonText: string): string {
  if (!a.rule) return reasonText;
  const both = `${a.policy}, ${a.rule}`;
  for (const head of [both, a.rule, a.policy]) {
    if (!startsAsWord(reasonText, head)) continue;
    const rest = reasonText.slice(head.length);
    const clauses = matchedClauses(a, rest);
    // A reason that names only the policy and an attribution with no clauses: nothing to add.
    if (head === a.policy && !clauses && !(a.peer || a.port)) return reasonText;
    return both + (clauses ? `: ${clauses}` : '') + rest;
  }
  return reasonText;
}

/** `text` is `head`, or `head` followed by a note (` (...)`, `; ...`). */
function startsAsWord(text: string, head: string): boolean {
  if (!head || !text.startsWith(head)) return false;
  const next = text.slice(head.length, head.length + 2);
  return next === '' || next === ' (' || next === '; ';
}
