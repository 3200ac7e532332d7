// Explain: a flow between pods chosen from the cluster (or addresses), decided
// by the active pipeline, shown with its walkthrough in both directions: the
// flow as asked, and its reverse (the destination opening a connection back).
// Requests: the pod list every 10 s; the two explanations every 4 s while a
// flow is shown, so verdicts follow pipeline and policy changes.
import { api } from '../api.js';
import { errorBox, h, replace } from '../dom.js';
import { every } from '../poll.js';
import { explanation } from './walkthrough.js';

const PODS_MS = 10_000;
const EXPLAIN_MS = 4000;
const OTHER = '__address__';

export function mount(root) {
  let pods = [];
  let problem;
  /** @type {{src: string, dst: string, protocol: string, port: number} | undefined} */ let flow;

  const endSelect = (id) => h('select', { id, name: id, required: true, onchange: () => syncAddress(id) });
  const srcSelect = endSelect('src');
  const dstSelect = endSelect('dst');
  const srcAddress = h('input', { id: 'src-address', name: 'src-address', hidden: true, placeholder: '203.0.113.7', 'aria-label': 'Source address', autocomplete: 'off' });
  const dstAddress = h('input', { id: 'dst-address', name: 'dst-address', hidden: true, placeholder: '203.0.113.7', 'aria-label': 'Destination address', autocomplete: 'off' });
  const protocol = h('select', { id: 'protocol', name: 'protocol' }, ['TCP', 'UDP', 'SCTP'].map((p) => h('option', { value: p }, p)));
  const port = h('input', { id: 'port', name: 'port', type: 'number', min: 1, max: 65535, required: true, value: 80, list: 'dst-ports', inputmode: 'numeric' });
  const portList = h('datalist', { id: 'dst-ports' });
  const out = h('div', { id: 'explain-result', 'aria-live': 'polite' });
  const loadProblem = h('div');

  function syncAddress(id) {
    const select = id === 'src' ? srcSelect : dstSelect;
    const input = id === 'src' ? srcAddress : dstAddress;
    input.hidden = select.value !== OTHER;
    input.required = !input.hidden;
    if (id === 'dst') {
      const pod = pods.find((p) => `${p.namespace}/${p.name}` === dstSelect.value);
      replace(portList, (pod?.ports ?? []).map((p) => h('option', { value: p.port }, `${p.port}/${p.protocol}${p.name ? ` (${p.name})` : ''}`)));
    }
  }

  function fillSelect(select, fallbackIndex) {
    const keep = select.value;
    const byNs = new Map();
    for (const p of pods) byNs.set(p.namespace, [...(byNs.get(p.namespace) ?? []), p]);
    replace(select,
      [...byNs].map(([ns, list]) => h('optgroup', { label: `namespace ${ns}` }, list.map((p) => h('option', { value: `${p.namespace}/${p.name}` },
        `${p.namespace}/${p.name}${Object.keys(p.labels).length ? `  (${Object.entries(p.labels).map(([k, v]) => `${k}=${v}`).join(', ')})` : ''}`)))),
      h('option', { value: OTHER }, 'another address\u2026'));
    const values = [...select.options].map((o) => o.value);
    select.value = values.includes(keep) ? keep : values[Math.min(fallbackIndex, Math.max(0, values.length - 2))] ?? OTHER;
  }

  const form = h('form', { class: 'flow-form', onsubmit: (e) => { e.preventDefault(); ask(); } },
    h('div', { class: 'fields' },
      h('label', { for: 'src' }, 'Source'), h('div', null, srcSelect, srcAddress),
      h('label', { for: 'dst' }, 'Destination'), h('div', null, dstSelect, dstAddress),
      h('label', { for: 'protocol' }, 'Protocol'), protocol,
      h('label', { for: 'port' }, 'Destination port'), h('div', null, port, portList)),
    h('button', { type: 'submit', class: 'primary' }, 'Explain'));

  replace(root,
    h('h1', null, 'Explain'),
    h('p', { class: 'hint' }, 'Why is a flow allowed or denied? The active pipeline decides it as the dataplane would, and shows which stage decided in each walk.'),
    loadProblem, form, out);

  const end = (select, input) => (select.value === OTHER ? input.value.trim() : select.value);

  function ask() {
    flow = { src: end(srcSelect, srcAddress), dst: end(dstSelect, dstAddress), protocol: protocol.value, port: Number(port.value) };
    explainPoll.now();
  }

  async function explainNow() {
    if (!flow) return;
    const reverse = { src: flow.dst, dst: flow.src, protocol: flow.protocol, port: flow.port };
    try {
      const [there, back] = [await api('v1/explain', { method: 'POST', body: flow, background: true }), await api('v1/explain', { method: 'POST', body: reverse, background: true })];
      replace(out, explanation('Forward', flow, there.data), explanation('Reverse', reverse, back.data));
    } catch (err) {
      replace(out, errorBox(err));
    }
  }

  const podPoll = every(PODS_MS, async () => {
    try {
      const fresh = (await api('v1/cluster/pods', { background: true })).data.pods;
      // Rebuilding the lists would close one the user has open: only when the pods changed.
      if (JSON.stringify(fresh) === JSON.stringify(pods) && srcSelect.options.length) return;
      pods = fresh;
      replace(loadProblem, pods.length ? null : h('p', { class: 'hint' }, 'The agent knows no pods yet; enter addresses instead.'));
      fillSelect(srcSelect, 0);
      fillSelect(dstSelect, 2);
      syncAddress('src');
      syncAddress('dst');
    } catch (err) {
      problem = err;
      replace(loadProblem, errorBox(problem));
    }
  });
  const explainPoll = every(EXPLAIN_MS, explainNow);
  return () => { podPoll.stop(); explainPoll.stop(); };
}
