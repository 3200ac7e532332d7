// Flows: needs a flow log in the agent, which does not exist yet.
import { placeholder } from './placeholder.js';

export function mount(root) {
  placeholder(root, {
    title: 'Flows',
    needs: 'the agent does not record flows (the flow-log capability: observed connections with the stage that decided each).',
    route: 'a flow-log read route (GET /v1/flows)',
    meanwhile: 'Meanwhile, Explain decides any flow on demand, and /metrics counts verdicts per stage.',
  });
}
