// A few lines instead of a framework: build elements from a tag, attributes
// and children. Strings become text nodes, so nothing the API returns is ever
// parsed as HTML.

/**
 * @param {string} tag
 * @param {Record<string, unknown> | null} [attrs] `on*` functions become listeners; `class`, `for`, aria-*, data-* and others become attributes; false/null/undefined are left out
 * @param {...(Node | string | number | null | undefined | false | Array<Node | string | null | undefined | false>)} children
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), /** @type {EventListener} */ (value));
    else if (key === 'value' && 'value' in el) /** @type {HTMLInputElement} */ (el).value = String(value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(typeof c === 'string' || typeof c === 'number' ? String(c) : c);
  }
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** Tells screen readers what just happened (the page's polite live region). */
export function announce(text) {
  const region = document.getElementById('announcer');
  if (!region) return;
  region.textContent = '';
  // A fresh text node in a later frame makes screen readers read a repeated message again.
  requestAnimationFrame(() => { region.textContent = text; });
}

/** An error as the admin API sent it: `KWP_ERR_CODE: message`. */
export function errorBox(err) {
  const text = err && err.code ? `${err.code}: ${err.message}` : String(err && err.message ? err.message : err);
  return h('p', { class: 'error', role: 'alert' }, text);
}

export const shortDigest = (sha256) => (sha256 ? sha256.slice(0, 12) : '');
