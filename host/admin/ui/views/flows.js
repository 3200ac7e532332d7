// Flows: the agent's aggregated flow records (GET /v1/flows, docs/flows.md),
// newest first, with the stage, policy and rule that decided each direction;
// filtered by verdict and namespace as `kwp flows` is. Requests: the ring
// every 5 s (the agent emits records once per aggregation interval).
import { api } from '../api.js';
import { errorBox, h, replace } from '../dom.js';
import { every } from '../poll.js';

const REFRESH_MS = 5000;

/** Who decided one direction, as `kwp flows` prints it. */
function decided(d) {
  if (d.action === 'Default') return 'no policy';
  if (d.action === 'Skipped') return '\u2013';
  if (d.action === 'Remote') return 'other cluster';
  const who = [d.policy, d.rule].filter(Boolean).join(' ');
  const detail = [d.peer, d.rulePort && `port ${d.rulePort}`].filter(Boolean).join(', ');
  return `${d.action}${d.stage ? ` by ${d.stage}` : ''}${who ? `: ${who}` : ''}${detail ? ` (${detail})` : ''}`;
}

export function mount(root) {
  let answer;
  let problem;
  const verdict = h('select', { id: 'flows-verdict', 'aria-label': 'Verdict', onchange: () => poll.now() },
    h('option', { value: '' }, 'allow and deny'), h('option', { value: 'deny' }, 'deny only'), h('option', { value: 'allow' }, 'allow only'));
  const namespace = h('input', { id: 'flows-namespace', 'aria-label': 'Namespace', placeholder: 'namespace', autocomplete: 'off', onchange: () => poll.now() });
  const list = h('div', { id: 'flows-list', 'aria-live': 'polite' });
  replace(root, h('h1', null, 'Flows'),
    h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); poll.now(); } }, verdict, namespace),
    list);

  function render() {
    if (problem) { replace(list, errorBox(problem)); return; }
    if (!answer) { replace(list, h('p', { class: 'hint' }, 'Loading\u2026')); return; }
    const rows = [...answer.flows].reverse();
    const note = h('p', { class: 'hint' }, `${rows.length} records, aggregated every ${answer.intervalSeconds} s; the agent keeps the newest ${answer.ringSize}`
      + (answer.dropped ? `; ${answer.dropped} connections went unrecorded` : '') + '.');
    if (rows.length === 0) { replace(list, note, h('p', null, 'No connection decided yet.')); return; }
    replace(list, note, h('table', { class: 'flows' },
      h('thead', null, h('tr', null, ...['Last seen', 'Source', 'Destination', 'Port', 'Verdict', 'Count', 'Egress', 'Ingress'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', null, ...rows.map((r) => h('tr', { class: `flow ${r.verdict}` },
        h('td', null, r.lastSeen.slice(11, 23)), h('td', null, r.src), h('td', null, r.dst),
        h('td', null, `${r.protocol}/${r.port}${r.dstPortName ? ` (${r.dstPortName})` : ''}`),
        h('td', null, r.verdict.toUpperCase()), h('td', null, String(r.count)),
        h('td', null, decided(r.egress)), h('td', null, decided(r.ingress)))))));
  }

  const poll = every(REFRESH_MS, async () => {
    const q = new URLSearchParams({ limit: '500' });
    if (verdict.value) q.set('verdict', verdict.value);
    if (namespace.value.trim()) q.set('namespace', namespace.value.trim());
    try {
      answer = (await api(`v1/flows?${q}`, { background: true })).data;
      problem = undefined;
    } catch (err) {
      problem = err;
    }
    render();
  });
  render();
  return () => poll.stop();
}
