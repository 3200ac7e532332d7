// Fleet: needs the fleet status reads (several agents), not in this agent yet.
import { placeholder } from './placeholder.js';

export function mount(root) {
  placeholder(root, {
    title: 'Fleet',
    needs: 'this agent has no fleet status (the fleet capability: the pipeline revision and health of every agent of the cluster).',
    route: 'fleet status reads (GET /v1/fleet)',
    meanwhile: 'Meanwhile, open the console of each agent, or read kwp_pipeline_revision from every agent\u2019s /metrics.',
  });
}
