// Reachability: the pod-to-pod matrix of a namespace or a label selection for
// chosen ports, computed by the agent's active pipeline (POST /v1/matrix, the
// same evaluation as `kwp matrix`), drawn as a heatmap; a cell's walkthrough
// on click. Requests: the namespaces every 15 s, the matrix every 5 s.
import { api } from '../api.js';
import { errorBox, h, replace } from '../dom.js';
import { every } from '../poll.js';
import { explanation } from './walkthrough.js';

const MATRIX_MS = 5000;
const NAMESPACES_MS = 15_000;

export function mount(root) {
  let namespaces = [];
  /** @type {{namespace?: string, selector?: string, ports: string[]} | undefined} */ let query;
  let matrix;
  let selected; // {src, dst}
  let only = ''; // one port's matrix (`TCP/80`), or '' for every port together
  const portKey = (m) => `${m.protocol}/${m.port}`;
  const shown = () => (only ? matrix.matrices.filter((m) => portKey(m) === only) : matrix.matrices);

  const nsSelect = h('select', { id: 'matrix-namespace', name: 'namespace' }, h('option', { value: '' }, 'all namespaces'));
  const selector = h('input', { id: 'matrix-selector', name: 'selector', placeholder: 'app=web,tier!=db', autocomplete: 'off', 'aria-describedby': 'matrix-selector-hint' });
  const ports = h('input', { id: 'matrix-ports', name: 'ports', value: '80', required: true, autocomplete: 'off', 'aria-describedby': 'matrix-ports-hint' });
  const heat = h('div', { id: 'heatmap', 'aria-live': 'polite' });
  const detail = h('div', { id: 'cell-detail', 'aria-live': 'polite' });

  const form = h('form', { class: 'matrix-form', onsubmit: (e) => { e.preventDefault(); compute(); } },
    h('div', { class: 'fields' },
      h('label', { for: 'matrix-namespace' }, 'Namespace'), nsSelect,
      h('label', { for: 'matrix-selector' }, 'Pod label selector'), selector,
      h('label', { for: 'matrix-ports' }, 'Ports'), ports),
    h('p', { id: 'matrix-selector-hint', class: 'hint' }, 'Optional; equality-based, as kubectl writes it: key=value, key!=value, key, !key, separated by commas.'),
    h('p', { id: 'matrix-ports-hint', class: 'hint' }, 'Comma-separated, PORT or PORT/PROTOCOL, e.g. 80, 81, 53/UDP (at most 16).'),
    h('button', { type: 'submit', class: 'primary' }, 'Show matrix'));

  replace(root,
    h('h1', null, 'Reachability'),
    h('p', { class: 'hint' }, 'Rows are sources, columns destinations. Each cell is decided by the active pipeline for every chosen port (egress of the source and ingress of the destination); choose a cell for its walkthrough.'),
    form, heat, detail);

  function compute() {
    query = {
      ports: ports.value.split(',').map((p) => p.trim()).filter(Boolean),
      ...(nsSelect.value ? { namespace: nsSelect.value } : {}),
      ...(selector.value.trim() ? { selector: selector.value.trim() } : {}),
    };
    selected = undefined;
    only = '';
    replace(detail, null);
    matrixPoll.now();
  }

  function render() {
    if (!matrix) return;
    // A refresh redraws the table: keep the keyboard where it was.
    const active = heat.contains(document.activeElement) ? /** @type {HTMLElement} */ (document.activeElement) : undefined;
    draw();
    if (active?.id) document.getElementById(active.id)?.focus();
    else if (active?.dataset.src) heat.querySelector(`button[data-src="${CSS.escape(active.dataset.src)}"][data-dst="${CSS.escape(active.dataset.dst)}"]`)?.focus();
  }

  function draw() {
    const { pods, revision } = matrix;
    const matrices = shown();
    const portNames = matrices.map(portKey);
    const all = matrix.matrices.map(portKey);
    if (pods.length === 0) { replace(heat, h('p', { class: 'hint' }, 'No pod matches this selection.')); return; }
    const cell = (i, j) => {
      const allowed = matrices.filter((m) => m.rows[i][j] === '.').map((m) => `${m.protocol}/${m.port}`);
      const denied = portNames.filter((p) => !allowed.includes(p));
      const share = allowed.length / portNames.length;
      const cls = share === 1 ? 'all' : share === 0 ? 'none' : 'some';
      const symbol = share === 1 ? '\u2713' : share === 0 ? '\u2717' : `${allowed.length}/${portNames.length}`;
      const src = pods[i];
      const dst = pods[j];
      const label = `${src} to ${dst}: ${allowed.length ? `allowed on ${allowed.join(', ')}` : ''}${allowed.length && denied.length ? '; ' : ''}${denied.length ? `denied on ${denied.join(', ')}` : ''}`;
      const isSelected = selected && selected.src === src && selected.dst === dst;
      return h('td', { class: `cell ${cls}` }, h('button', {
        type: 'button', 'aria-label': label, title: label, 'aria-pressed': isSelected ? 'true' : 'false',
        'data-src': src, 'data-dst': dst, 'data-allowed': allowed.join(' '),
        onclick: () => { selected = { src, dst }; render(); explainCell(src, dst); },
      }, symbol));
    };
    const picker = all.length > 1 ? h('p', null, h('label', { for: 'matrix-show' }, 'Show '),
      h('select', { id: 'matrix-show', onchange: (e) => { only = e.target.value; render(); } },
        h('option', { value: '' }, 'every port together'), all.map((p) => h('option', { value: p, selected: p === only }, `${p} only`)))) : null;
    replace(heat,
      h('p', { class: 'meta' }, `${pods.length} pods \u00d7 ${all.join(', ')} \u00b7 decided by pipeline revision ${revision}`),
      picker,
      h('div', { class: 'heatmap-scroll' },
        h('table', { class: 'heatmap' },
          h('caption', { class: 'visually-hidden' }, `Reachability on ${portNames.join(', ')}: rows are sources, columns destinations`),
          h('thead', null, h('tr', null, h('td', { class: 'corner' }, 'from \u2193 to \u2192'), pods.map((p) => h('th', { scope: 'col' }, h('span', null, p))))),
          h('tbody', null, pods.map((src, i) => h('tr', null, h('th', { scope: 'row' }, src), pods.map((_, j) => cell(i, j))))))),
      h('ul', { class: 'legend', 'aria-label': 'Legend' },
        h('li', null, h('span', { class: 'swatch all' }, '\u2713'), ' allowed on every port'),
        h('li', null, h('span', { class: 'swatch some' }, '1/2'), ' allowed on some ports'),
        h('li', null, h('span', { class: 'swatch none' }, '\u2717'), ' denied on every port')));
  }

  async function explainCell(src, dst) {
    replace(detail, h('p', { class: 'hint' }, `Explaining ${src} \u2192 ${dst}\u2026`));
    try {
      const parts = [];
      for (const m of shown()) {
        const flow = { src, dst, protocol: m.protocol, port: m.port };
        parts.push(explanation('Cell', flow, (await api('v1/explain', { method: 'POST', body: flow })).data));
      }
      replace(detail, h('h2', null, `Walkthrough of ${src} \u2192 ${dst}`), parts);
    } catch (err) {
      replace(detail, errorBox(err));
    }
  }

  const nsPoll = every(NAMESPACES_MS, async () => {
    try {
      const fresh = (await api('v1/cluster/namespaces', { background: true })).data.namespaces;
      if (JSON.stringify(fresh) === JSON.stringify(namespaces)) return;
      namespaces = fresh;
      const keep = nsSelect.value;
      replace(nsSelect, h('option', { value: '' }, 'all namespaces'), namespaces.map((n) => h('option', { value: n.name }, `${n.name} (${n.pods} pods)`)));
      nsSelect.value = namespaces.some((n) => n.name === keep) ? keep : '';
    } catch (err) {
      replace(heat, errorBox(err));
    }
  });
  const matrixPoll = every(MATRIX_MS, async () => {
    if (!query) return;
    try {
      const fresh = (await api('v1/matrix', { method: 'POST', body: query, background: true })).data;
      if (matrix && JSON.stringify(fresh) === JSON.stringify(matrix)) return;
      matrix = fresh;
      render();
    } catch (err) {
      matrix = undefined;
      replace(heat, errorBox(err));
    }
  });
  return () => { nsPoll.stop(); matrixPoll.stop(); };
}
