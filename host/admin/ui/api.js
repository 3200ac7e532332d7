// The admin API client of the console. The token lives in sessionStorage (this
// tab, until it closes) and travels only in the Authorization header. A call
// the API refuses for want of a token opens the token dialog once and is
// retried with the token entered.

const TOKEN_KEY = 'kwp.adminToken';
/** The API root: the console is served at <root>/ui/, also under an embedder's prefix. */
const ROOT = new URL('../', location.href);

export class ApiError extends Error {
  /** @param {number} status @param {string} code @param {string} message */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const listeners = new Set();
/** Calls `fn(hasToken)` whenever the token is set or forgotten. */
export function onTokenChange(fn) { listeners.add(fn); return () => listeners.delete(fn); }
const changed = () => { for (const fn of listeners) fn(hasToken()); };

export const hasToken = () => Boolean(sessionStorage.getItem(TOKEN_KEY));
export function setToken(token) { sessionStorage.setItem(TOKEN_KEY, token); changed(); }
export function forgetToken() { sessionStorage.removeItem(TOKEN_KEY); changed(); }

let asking;
/**
 * Opens the token dialog (one at a time: concurrent refusals share it).
 * Resolves true when a token was entered.
 * @param {string} why what the API said
 */
export function askForToken(why) {
  asking ??= new Promise((resolve) => {
    const dialog = /** @type {HTMLDialogElement} */ (document.getElementById('token-dialog'));
    const input = /** @type {HTMLInputElement} */ (document.getElementById('token-input'));
    document.getElementById('token-why').textContent = why;
    input.value = '';
    dialog.addEventListener('close', () => {
      asking = undefined;
      const ok = dialog.returnValue === 'ok' && input.value.trim().length > 0;
      if (ok) setToken(input.value.trim());
      input.value = '';
      resolve(ok);
    }, { once: true });
    dialog.showModal();
    input.focus();
  });
  return asking;
}

// After the user cancels the dialog for a read, background refreshes stop
// asking again until the user asks to enter a token.
let readsDeclined = false;
export const tokenDeclined = () => readsDeclined;
onTokenChange(() => { readsDeclined = false; });

/**
 * @param {string} path e.g. `v1/pipeline` (relative to the API root)
 * @param {{method?: string, body?: unknown, headers?: Record<string, string>, background?: boolean}} [options]
 *   `background`: a refresh, which does not open the token dialog once the user declined it
 * @returns {Promise<{data: any, etag: string | null, status: number}>}
 */
export async function api(path, options = {}) {
  const { method = 'GET', background = false } = options;
  for (let attempt = 0; ; attempt++) {
    const headers = { ...(options.headers ?? {}) };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.authorization = `Bearer ${token}`;
    let body;
    if (options.body instanceof ArrayBuffer || options.body instanceof Blob) body = options.body;
    else if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.body);
    }
    let res;
    try {
      res = await fetch(new URL(path, ROOT), { method, headers, body, cache: 'no-store', credentials: 'omit', redirect: 'error' });
    } catch (err) {
      throw new ApiError(0, 'KWP_ERR_ADMIN_UNREACHABLE', `${method} /${path}: the agent did not answer (${err.message}); is it still running?`);
    }
    if (res.ok) {
      const type = res.headers.get('content-type') ?? '';
      const data = type.includes('json') ? await res.json() : await res.text();
      return { data, etag: res.headers.get('etag'), status: res.status };
    }
    const err = await errorOf(res, method, path);
    const tokenProblem = err.code === 'KWP_ERR_UNAUTHORIZED' || err.code === 'KWP_ERR_FORBIDDEN';
    if (!tokenProblem || attempt > 0) throw err;
    if (err.code === 'KWP_ERR_FORBIDDEN') forgetToken();
    if (background && readsDeclined) throw err;
    const entered = await askForToken(err.message);
    if (!entered) {
      if (method === 'GET' || background) readsDeclined = true;
      throw err;
    }
  }
}

/** The API's `{code, message}` body as an ApiError; anything else keeps its status text. */
async function errorOf(res, method, path) {
  let body;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  if (body && typeof body.code === 'string' && typeof body.message === 'string') return new ApiError(res.status, body.code, body.message);
  return new ApiError(res.status, 'KWP_ERR_ADMIN_UNREACHABLE', `${method} /${path}: HTTP ${res.status} ${res.statusText}, not an admin API answer`);
}
