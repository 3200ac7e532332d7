// Modules: the store (every stored version, its signature and the stages that
// run it), the built-in modules the pipeline runs, uploads by drag and drop or
// file picker, removal. A refused upload shows the server's KWP_ERR code and
// message exactly as sent. Requests: the store and the status every 5 s.
import { api } from '../api.js';
import { announce, errorBox, h, replace, shortDigest } from '../dom.js';
import { every } from '../poll.js';
import { readKwpMeta } from '../wasm-meta.js';

const REFRESH_MS = 5000;

export function mount(root) {
  let modules;
  let stages = [];
  let loadProblem; // the last refresh failure
  let problem; // the last removal's refusal
  /** @type {File | undefined} */ let file;
  let uploading = false;

  const list = h('div');
  const fileInput = h('input', { id: 'upload-file', type: 'file', accept: '.wasm,application/wasm', class: 'visually-hidden', onchange: () => pick(fileInput.files?.[0]) });
  const chosen = h('p', { id: 'upload-chosen', class: 'hint' }, 'No file chosen.');
  const nameInput = h('input', { id: 'upload-name', name: 'name', required: true, pattern: '[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?', autocomplete: 'off' });
  const versionInput = h('input', { id: 'upload-version', name: 'version', required: true, autocomplete: 'off' });
  const configInput = h('input', { id: 'upload-config', name: 'config', placeholder: '{"tier":"Admin"}', autocomplete: 'off', 'aria-describedby': 'upload-config-hint' });
  const signatureInput = h('input', { id: 'upload-signature', name: 'signature', autocomplete: 'off', 'aria-describedby': 'upload-signature-hint' });
  const result = h('div', { id: 'upload-result', 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Upload');

  const drop = h('label', {
    for: 'upload-file', class: 'dropzone', id: 'dropzone',
    ondragover: (e) => { e.preventDefault(); drop.classList.add('over'); },
    ondragleave: () => drop.classList.remove('over'),
    ondrop: (e) => { e.preventDefault(); drop.classList.remove('over'); pick(e.dataTransfer?.files?.[0]); },
  }, h('strong', null, 'Drop a .wasm here'), ' or ', h('span', { class: 'link' }, 'choose a file'));

  const form = h('form', { class: 'upload', onsubmit: (e) => { e.preventDefault(); upload(); } },
    h('h2', { id: 'upload-title' }, 'Upload a module'),
    fileInput, drop, chosen,
    h('div', { class: 'fields' },
      h('label', { for: 'upload-name' }, 'Name (kwp.meta name)'), nameInput,
      h('label', { for: 'upload-version' }, 'Version (kwp.meta version)'), versionInput,
      h('label', { for: 'upload-config' }, 'Self-test config (JSON, optional)'), configInput,
      h('label', { for: 'upload-signature' }, 'Signature (base64, optional)'), signatureInput),
    h('p', { id: 'upload-config-hint', class: 'hint' }, 'The store configures the module with this object for its self-test; modules that need a config (e.g. a tier) refuse {}.'),
    h('p', { id: 'upload-signature-hint', class: 'hint' }, 'Needed when the agent trusts signing keys: kwp sign FILE --key KEY --name N --version V prints it.'),
    submit, result);

  replace(root, h('h1', null, 'Modules'), list, form);

  async function pick(f) {
    if (!f) return;
    file = f;
    const bytes = new Uint8Array(await f.arrayBuffer());
    const meta = readKwpMeta(bytes);
    if (meta?.name) nameInput.value = meta.name;
    if (meta?.version) versionInput.value = meta.version;
    replace(chosen, `${f.name}, ${bytes.length} bytes`, meta ? ` \u2014 kwp.meta: ${meta.name}@${meta.version}${meta.description ? `, ${meta.description}` : ''}` : ' \u2014 no readable kwp.meta: enter the name and version');
    replace(result, null);
    (meta ? submit : nameInput).focus();
  }

  async function upload() {
    if (uploading) return;
    if (!file) { replace(result, h('p', { class: 'error', role: 'alert' }, 'Choose or drop a .wasm file first.')); return; }
    uploading = true;
    submit.disabled = true;
    replace(result, h('p', { class: 'hint' }, `Uploading ${file.name}\u2026 (validation, fuel instrumentation and a self-test run on the agent)`));
    const query = new URLSearchParams({ name: nameInput.value.trim(), version: versionInput.value.trim() });
    if (configInput.value.trim()) query.set('config', configInput.value.trim());
    const headers = { 'content-type': 'application/wasm' };
    if (signatureInput.value.trim()) headers['x-kwp-signature'] = signatureInput.value.trim();
    try {
      const { data } = await api(`v1/modules?${query}`, { method: 'POST', body: await file.arrayBuffer(), headers });
      const m = data.module;
      const text = `${data.created ? 'Stored' : 'Already stored'}: ${m.name}@${m.version} sha256:${m.sha256} (${m.size} bytes, ABI ${m.abi})`;
      replace(result, h('p', { class: 'ok', role: 'status' }, text));
      announce(text);
      await poll.now();
    } catch (err) {
      replace(result, errorBox(err));
    } finally {
      uploading = false;
      submit.disabled = false;
    }
  }

  async function remove(m) {
    if (!confirm(`Remove ${m.name}@${m.version} from the store?`)) return;
    try {
      await api(`v1/modules/${encodeURIComponent(`${m.name}@${m.version}`)}`, { method: 'DELETE' });
      announce(`removed ${m.name}@${m.version}`);
      problem = undefined;
    } catch (err) {
      problem = err;
    }
    await poll.now();
  }

  function render() {
    if (!modules) { replace(list, loadProblem ? errorBox(loadProblem) : h('p', null, 'Loading\u2026')); return; }
    const stored = new Set(modules.map((m) => m.sha256));
    const builtins = new Map();
    for (const s of stages) {
      if (stored.has(s.sha256)) continue;
      const b = builtins.get(s.sha256) ?? { name: s.moduleName, version: s.moduleVersion, sha256: s.sha256, usedBy: [] };
      b.usedBy.push(s.name);
      builtins.set(s.sha256, b);
    }
    replace(list,
      loadProblem ? errorBox(loadProblem) : null,
      problem ? errorBox(problem) : null,
      h('h2', null, 'Stored modules'),
      modules.length === 0 ? h('p', { class: 'hint' }, 'The store is empty: the pipeline runs built-in modules only.') :
        h('table', { class: 'modules' },
          h('caption', { class: 'visually-hidden' }, 'Stored modules, every version'),
          h('thead', null, h('tr', null, ['Module', 'Digest', 'Size', 'ABI', 'Kinds', 'On failure', 'Signature', 'Uploaded', 'Used by', ''].map((t) => h('th', { scope: 'col' }, t)))),
          h('tbody', null, modules.map((m) => h('tr', { 'data-module': `${m.name}@${m.version}` },
            h('th', { scope: 'row' }, `${m.name}@${m.version}`, m.description ? h('span', { class: 'hint block' }, m.description) : null),
            h('td', { title: `sha256:${m.sha256}` }, h('code', null, shortDigest(m.sha256))),
            h('td', null, `${m.size} B`),
            h('td', null, m.abi),
            h('td', null, m.kinds.length ? m.kinds.join(', ') : '\u2013'),
            h('td', null, m.failurePolicy),
            h('td', null, m.signedBy ? h('span', { class: 'badge enforce', title: `signed by the trusted key ${m.signedBy}` }, `signed ${m.signedBy.slice(0, 16)}`) : h('span', { class: 'badge audit' }, 'unsigned')),
            h('td', null, h('time', { datetime: m.uploadedAt }, new Date(m.uploadedAt).toLocaleString())),
            h('td', null, m.usedBy.length ? m.usedBy.join(', ') : '\u2013'),
            h('td', null, h('button', { type: 'button', 'aria-label': `Remove ${m.name}@${m.version}`, onclick: () => remove(m) }, 'Remove')))))),
      h('h2', null, 'Built-in modules in the active pipeline'),
      h('table', { class: 'modules' },
        h('caption', { class: 'visually-hidden' }, 'Built-in modules the active pipeline runs'),
        h('thead', null, h('tr', null, ['Module', 'Digest', 'Used by'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, [...builtins.values()].map((b) => h('tr', null,
          h('th', { scope: 'row' }, `${b.name}@${b.version}`),
          h('td', { title: `sha256:${b.sha256}` }, h('code', null, shortDigest(b.sha256))),
          h('td', null, b.usedBy.join(', ')))))));
  }

  const poll = every(REFRESH_MS, async () => {
    try {
      modules = (await api('v1/modules', { background: true })).data.modules;
      stages = (await api('v1/pipeline/status', { background: true })).data.stages;
      loadProblem = undefined;
    } catch (err) {
      loadProblem = err;
    }
    render();
  });
  render();
  return () => poll.stop();
}
