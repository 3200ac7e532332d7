// Pipeline: the active stages in order as a diagram with their modules and
// live rates; reorder by drag and drop or by keyboard into a draft, preview
// it, apply it with If-Match; the history of changes with one-click rollback.
// Requests: the status every 2 s, the history when the revision moves.
import { api } from '../api.js';
import { announce, errorBox, h, replace, shortDigest } from '../dom.js';
import { every } from '../poll.js';

const REFRESH_MS = 2000;
const VERDICTS = [['accept', 'Accept'], ['deny', 'Deny'], ['next', 'Next'], ['pass', 'Pass']];

/** Per-second rate of one counter between two readings of the same stage, or undefined when there is no earlier reading. */
function rate(now, before, key, seconds) {
  if (!before || seconds <= 0) return undefined;
  const d = now.counters[key] - before.counters[key];
  return d >= 0 ? d / seconds : undefined;
}

const formatRate = (r) => (r === undefined ? '–' : r >= 100 ? r.toFixed(0) : r.toFixed(1));

/** Moves `name` to `index` in a copy of `order`. */
function moved(order, name, index) {
  const out = order.filter((n) => n !== name);
  out.splice(Math.max(0, Math.min(index, out.length)), 0, name);
  return out;
}

const sameOrder = (a, b) => a.length === b.length && a.every((n, i) => n === b[i]);

export function mount(root) {
  /** @type {any} */ let status;
  /** @type {any} */ let earlier; // the reading before `status`, for rates
  let history = [];
  let historyRevision;
  /** @type {{base: number, order: string[]} | undefined} */ let draft;
  let dragging;
  let busy = false;
  let problem; // the last refresh error
  let outcome; // the last change's result, {ok, text} or an error

  const diagram = h('ol', { class: 'stages', 'aria-describedby': 'reorder-help' });
  const preview = h('section', { class: 'preview', 'aria-labelledby': 'preview-title', hidden: true });
  const historyBox = h('section', { 'aria-labelledby': 'history-title' });
  const statusLine = h('p', { class: 'meta', 'aria-live': 'off' });
  const messages = h('div', { 'aria-live': 'polite' });

  replace(root,
    h('h1', null, 'Pipeline'),
    statusLine,
    messages,
    h('p', { id: 'reorder-help', class: 'hint' },
      'Each packet walks the stages left to right, once for the source\u2019s egress and once for the destination\u2019s ingress; the first Accept or Deny decides. ',
      'To reorder, drag a stage onto another, or focus it and press Alt+Up (earlier) or Alt+Down (later), or use its Earlier and Later buttons. Nothing changes until you apply the draft.'),
    diagram,
    preview,
    historyBox,
  );

  const activeOrder = () => (status ? status.stages.map((s) => s.name) : []);

  function render() {
    if (!status) {
      replace(statusLine, problem ? '' : 'Loading\u2026');
      replace(messages, problem ? errorBox(problem) : null);
      return;
    }
    replace(statusLine, `Revision ${status.revision}`, status.previousRevision !== undefined ? ` \u00b7 rollback goes to revision ${status.previousRevision}` : '',
      ` \u00b7 ${status.stages.length} stages \u00b7 counters read ${new Date(status.readAt).toLocaleTimeString()}`);
    replace(messages, problem ? errorBox(problem) : null,
      outcome ? (outcome.ok ? h('p', { class: 'ok', role: 'status' }, outcome.text) : errorBox(outcome.error)) : null);
    if (!dragging) renderDiagram();
    renderPreview();
    renderHistory();
  }

  function renderDiagram() {
    const focusKey = document.activeElement?.closest?.('.stages') ? document.activeElement.getAttribute('data-focus') : null;
    const byName = new Map(status.stages.map((s) => [s.name, s]));
    const order = draft ? draft.order : activeOrder();
    const seconds = earlier ? (Date.parse(status.readAt) - Date.parse(earlier.readAt)) / 1000 : 0;
    const before = new Map((earlier?.revision === status.revision ? earlier.stages : []).map((s) => [s.name, s]));
    const active = activeOrder();
    replace(diagram, order.map((name, i) => {
      const s = byName.get(name);
      const was = active.indexOf(name);
      const prev = before.get(name);
      const move = (to) => reorder(name, to);
      return h('li', {
        class: `stage${s.mode === 'audit' ? ' audit' : ''}${draft && was !== i ? ' moved' : ''}`,
        tabindex: 0,
        draggable: 'true',
        'data-stage': name,
        'data-focus': `stage:${name}`,
        'aria-label': `Stage ${i + 1} of ${order.length}: ${s.label} (${name})${draft && was !== i ? `, moved from position ${was + 1}` : ''}`,
        onkeydown: (e) => {
          if (!e.altKey) return;
          if (e.key === 'ArrowLeft' || e.key === 'ArrowUp') { e.preventDefault(); move(i - 1); }
          if (e.key === 'ArrowRight' || e.key === 'ArrowDown') { e.preventDefault(); move(i + 1); }
        },
        ondragstart: (e) => { dragging = name; e.dataTransfer.setData('text/plain', name); e.dataTransfer.effectAllowed = 'move'; },
        ondragend: () => { dragging = undefined; render(); },
        ondragover: (e) => { e.preventDefault(); e.dataTransfer.dropEffect = 'move'; },
        ondrop: (e) => {
          e.preventDefault();
          const from = e.dataTransfer.getData('text/plain') || dragging;
          dragging = undefined;
          // Dropped on a stage: take its place (the stages between shift towards where the dragged one was).
          if (from && from !== name) reorder(from, order.indexOf(name));
          else render();
        },
      },
      h('div', { class: 'stage-head' },
        h('span', { class: 'position', 'aria-hidden': 'true' }, String(i + 1)),
        h('strong', { class: 'label' }, s.label),
        h('span', { class: `badge ${s.mode}` }, s.mode)),
      h('p', { class: 'stage-name' }, name),
      h('dl', { class: 'facts' },
        h('dt', null, 'module'), h('dd', null, s.moduleName),
        h('dt', null, 'version'), h('dd', null, s.moduleVersion),
        h('dt', null, 'digest'), h('dd', { title: `sha256:${s.sha256}` }, h('code', null, shortDigest(s.sha256))),
        h('dt', null, 'on failure'), h('dd', null, s.failurePolicy)),
      h('table', { class: 'rates' },
        h('caption', { class: 'visually-hidden' }, `Verdicts of ${name} per second and in total`),
        h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'verdict'), h('th', { scope: 'col' }, 'per s'), h('th', { scope: 'col' }, 'total'))),
        h('tbody', null,
          VERDICTS.map(([key, title]) => h('tr', { class: key },
            h('th', { scope: 'row' }, title),
            h('td', { 'data-rate': key }, formatRate(rate(s, prev, key, seconds))),
            h('td', { 'data-total': key }, String(s.counters[key])))),
          h('tr', { class: s.counters.traps ? 'failure' : '' }, h('th', { scope: 'row' }, 'Traps'),
            h('td', null, formatRate(rate(s, prev, 'traps', seconds))), h('td', { 'data-total': 'traps' }, String(s.counters.traps))),
          h('tr', { class: s.counters.fuelExhausted ? 'failure' : '' }, h('th', { scope: 'row' }, 'Out of fuel'),
            h('td', null, formatRate(rate(s, prev, 'fuelExhausted', seconds))), h('td', { 'data-total': 'fuelExhausted' }, String(s.counters.fuelExhausted))))),
      h('div', { class: 'move' },
        h('button', { type: 'button', 'data-focus': `earlier:${name}`, disabled: i === 0, 'aria-label': `Move ${name} earlier`, onclick: () => move(i - 1) }, '\u25c0 Earlier'),
        h('button', { type: 'button', 'data-focus': `later:${name}`, disabled: i === order.length - 1, 'aria-label': `Move ${name} later`, onclick: () => move(i + 1) }, 'Later \u25b6')));
    }));
    if (focusKey) diagram.querySelector(`[data-focus="${CSS.escape(focusKey)}"]:not([disabled])`)?.focus();
  }

  function reorder(name, to) {
    const order = draft ? draft.order : activeOrder();
    if (to < 0 || to >= order.length) return;
    const next = moved(order, name, to);
    draft = sameOrder(next, activeOrder()) ? undefined : { base: draft?.base ?? status.revision, order: next };
    outcome = undefined;
    announce(`${name} is now stage ${to + 1} of ${order.length}${draft ? '; apply the draft to make it so' : '; the draft equals the active pipeline'}`);
    render();
  }

  function renderPreview() {
    preview.hidden = !draft;
    if (!draft) { preview.replaceChildren(); return; }
    const active = activeOrder();
    const stale = draft.base !== status.revision;
    replace(preview,
      h('h2', { id: 'preview-title' }, `Draft: a new order based on revision ${draft.base}`),
      h('ol', { class: 'diff' }, draft.order.map((name, i) => {
        const was = active.indexOf(name);
        const label = status.stages.find((s) => s.name === name)?.label ?? name;
        return h('li', { class: was === i ? 'same' : 'changed' }, `${label} (${name})`,
          was === i ? '' : h('span', { class: 'was' }, was < i ? ` \u2193 from ${was + 1}` : ` \u2191 from ${was + 1}`));
      })),
      h('p', { class: 'hint' },
        'What changes: stages answer in this order, so the first stage to Accept or Deny a flow may now be another one. ',
        'A per-flow verdict diff needs the flows capability, which this agent does not have yet; check Explain or Reachability after applying, and roll back in one click if needed.'),
      stale ? h('p', { class: 'error', role: 'alert' }, `Revision ${status.revision} became active after this draft was made; applying it will be refused (412). Discard it and reorder again.`) : null,
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'primary', disabled: busy, onclick: apply }, `Apply (If-Match: "${draft.base}")`),
        h('button', { type: 'button', disabled: busy, onclick: () => { draft = undefined; announce('draft discarded'); render(); } }, 'Discard draft')));
  }

  /** Runs one change (apply or rollback) at a time; `act` returns the text to announce. */
  async function change(act) {
    if (busy) return;
    busy = true;
    render();
    try {
      outcome = { ok: true, text: await act() };
      announce(outcome.text);
    } catch (err) {
      outcome = { ok: false, error: err };
    } finally {
      busy = false;
    }
    await poll.now();
  }

  const apply = () => change(async () => {
    // The specs carry each stage's config, which the status leaves out.
    const { data: current } = await api('v1/pipeline');
    const specs = new Map(current.stages.map((s) => [s.name, s]));
    const stages = draft.order.map((n) => specs.get(n)).filter(Boolean);
    const { data } = await api('v1/pipeline', { method: 'PUT', body: { stages }, headers: { 'if-match': `"${draft.base}"` } });
    draft = undefined;
    return `Applied: revision ${data.revision} is active (rollback goes to revision ${data.previousRevision}).`;
  });

  const rollback = () => change(async () => {
    const { data } = await api('v1/pipeline/rollback', { method: 'POST', headers: { 'if-match': `"${status.revision}"` } });
    return `Rolled back: revision ${data.revision} is active.`;
  });

  function renderHistory() {
    const rows = history.slice().reverse().slice(0, 20);
    replace(historyBox,
      h('h2', { id: 'history-title' }, 'History'),
      status.previousRevision !== undefined
        ? h('p', null, h('button', { type: 'button', class: 'primary', disabled: busy, onclick: rollback },
          `Roll back to revision ${status.previousRevision}`), h('span', { class: 'hint' }, ` (from revision ${status.revision}, If-Match: "${status.revision}")`))
        : h('p', { class: 'hint' }, 'No previous pipeline is kept yet, so there is nothing to roll back to.'),
      h('table', { class: 'history' },
        h('caption', { class: 'visually-hidden' }, 'Pipeline changes, newest first'),
        h('thead', null, h('tr', null, ['Time', 'Action', 'Revision', 'From', 'Reason'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, rows.map((e) => h('tr', null,
          h('td', null, h('time', { datetime: e.time }, new Date(e.time).toLocaleString())),
          h('td', null, e.action),
          h('td', null, String(e.revision)),
          h('td', null, e.from === undefined ? '\u2013' : String(e.from)),
          h('td', null, e.reason ?? ''))))));
  }

  const poll = every(REFRESH_MS, async () => {
    try {
      const { data } = await api('v1/pipeline/status', { background: true });
      if (status && status.revision === data.revision) earlier = status;
      else earlier = undefined;
      status = data;
      if (historyRevision !== data.revision || history.length === 0) {
        history = (await api('v1/pipeline/history', { background: true })).data.history;
        historyRevision = data.revision;
      }
      problem = undefined;
    } catch (err) {
      problem = err;
    }
    render();
  });
  render();
  return () => poll.stop();
}
