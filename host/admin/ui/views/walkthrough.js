// One explained flow as the Explain and Reachability views show it: the
// verdict, the walkthrough line `kwp explain` prints, and each direction's
// walk stage by stage.
import { h } from '../dom.js';

/** @param {{src: string, dst: string, protocol: string, port: number}} flow */
export const flowText = (flow) => `${flow.src} \u2192 ${flow.dst} ${flow.protocol}/${flow.port}`;

function walk(title, trace) {
  return h('div', { class: 'walk' },
    h('h4', null, title),
    trace.length === 0 ? h('p', { class: 'hint' }, 'No stage ran.') :
      h('ol', { class: 'trace' }, trace.map((t) => h('li', { class: `verdict-${t.verdict.toLowerCase()}${t.mode === 'audit' ? ' audit' : ''}` },
        h('span', { class: 'label' }, `[${t.label}]`), ' ',
        h('strong', null, t.verdict),
        t.mode === 'audit' ? h('span', { class: 'badge audit' }, 'audit: counted, not deciding') : null,
        t.failure ? h('span', { class: 'badge failure' }, `${t.failure}: failure policy`) : null,
        t.reason ? h('span', { class: 'reason' }, ` ${t.reason}`) : null))));
}

/**
 * @param {string} heading
 * @param {{src: string, dst: string, protocol: string, port: number}} flow
 * @param {{revision: number, verdict: 'allow'|'deny', walkthrough: string, egress: any[], ingress: any[], notes: string[]}} result
 */
export function explanation(heading, flow, result) {
  return h('section', { class: `explanation ${result.verdict}`, 'aria-label': `${heading}: ${flowText(flow)}` },
    h('h3', null, heading, ': ', flowText(flow), ' ', h('span', { class: `verdict ${result.verdict}` }, result.verdict.toUpperCase())),
    h('p', null, h('code', { class: 'walkthrough' }, result.walkthrough), h('span', { class: 'hint' }, `  (pipeline revision ${result.revision})`)),
    h('div', { class: 'walks' },
      walk(`Egress of ${flow.src} (the source\u2019s policies)`, result.egress),
      walk(`Ingress of ${flow.dst} (the destination\u2019s policies)`, result.ingress)),
    result.notes.length ? h('ul', { class: 'notes' }, result.notes.map((n) => h('li', null, n))) : null);
}
