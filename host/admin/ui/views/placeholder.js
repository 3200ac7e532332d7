// A view whose capability the agent does not have yet: it says which one is
// missing instead of drawing made-up data.
import { h, replace } from '../dom.js';

/** @param {HTMLElement} root @param {{title: string, needs: string, route: string, meanwhile: string}} what */
export function placeholder(root, what) {
  replace(root,
    h('h1', null, what.title),
    h('div', { class: 'placeholder', role: 'note' },
      h('p', null, h('strong', null, 'Not available on this agent: '), what.needs),
      h('p', null, `The console shows this view once the admin API serves ${what.route}.`),
      h('p', { class: 'hint' }, what.meanwhile)));
}
