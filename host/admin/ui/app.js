// The console's shell: navigation between views (the URL's hash, so a view can
// be bookmarked; the token never goes there), the token button, and mounting
// one view at a time. Each view module exports `mount(root) -> unmount`.
import { forgetToken, hasToken, onTokenChange, askForToken } from './api.js';
import * as pipeline from './views/pipeline.js';
import * as modules from './views/modules.js';
import * as explain from './views/explain.js';
import * as reachability from './views/reachability.js';
import * as flows from './views/flows.js';
import * as fleet from './views/fleet.js';

const VIEWS = { pipeline, modules, explain, reachability, flows, fleet };
const TITLES = { pipeline: 'Pipeline', modules: 'Modules', explain: 'Explain', reachability: 'Reachability', flows: 'Flows', fleet: 'Fleet' };

const main = document.getElementById('main');
let unmount = () => {};

function route() {
  const name = location.hash.replace(/^#\/?/, '').split('?')[0] || 'pipeline';
  const view = VIEWS[name] ? name : 'pipeline';
  unmount();
  main.replaceChildren();
  document.title = `${TITLES[view]} · kube-wasm-policies console`;
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.getAttribute('href') === `#/${view}`) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  unmount = VIEWS[view].mount(main) ?? (() => {});
}

function showTokenState() {
  const state = document.getElementById('token-state');
  const button = document.getElementById('token-button');
  state.textContent = hasToken() ? 'Admin token set for this tab' : 'No admin token';
  button.textContent = hasToken() ? 'Forget token' : 'Enter token';
}

document.getElementById('token-button').addEventListener('click', () => {
  if (hasToken()) forgetToken();
  else askForToken('Reads need the token unless the agent runs with --admin-reads-open; changes always do.');
});
// Views keep polling; their next refresh picks the new token up (a remount would drop a draft).
onTokenChange(showTokenState);
window.addEventListener('hashchange', () => { route(); main.focus(); });
showTokenState();
route();
