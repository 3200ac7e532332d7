// POST /v1/matrix: the reachability matrix of a namespace or a label selection
// on the live cluster state, decided by the active pipeline (what `kwp matrix`
// computes from manifests).
import type { FastifyInstance } from 'fastify';
import { KwpError } from '../../errors.js';
import type { PolicyEngine } from '../../pipeline/engine.js';
import { resolveFlow } from '../../flows.js';
import { selectPods } from '../../state/cluster-listing.js';
import { parseMatrixPort, reachabilityMatrix, type MatrixDecider } from '../../reachability.js';
import { errorResponses } from '../schemas.js';
import type { AdminRouteConfig } from '../options.js';

/** Cells (pods² × ports) one request may ask for: each is two walks of the pipeline on the agent's main thread. */
export const MAX_MATRIX_CELLS = 40_000;

interface MatrixBody { namespace?: string; selector?: string; ports: string[] }

export function matrixRoutes(app: FastifyInstance, engine: PolicyEngine): void {
  app.post<{ Body: MatrixBody }>('/v1/matrix', {
    config: { access: 'read' } satisfies AdminRouteConfig,
    schema: {
      summary: 'Pod-to-pod reachability of a namespace or label selection, decided by the active pipeline',
      description: `Rows are sources, columns destinations, in the order of "pods"; "." allowed, "X" denied. At most ${MAX_MATRIX_CELLS} cells (pods × pods × ports). Computed in slices between packet decisions; a pipeline swap or cluster change meanwhile starts it over, so every cell comes from the revision named.`,
      tags: ['explain'],
      body: {
        type: 'object',
        required: ['ports'],
        additionalProperties: false,
        properties: {
          namespace: { type: 'string', description: 'only pods of this namespace' },
          selector: { type: 'string', description: 'equality-based label selector over pod labels, e.g. app=web,tier!=db' },
          ports: { type: 'array', minItems: 1, maxItems: 16, items: { type: 'string' }, description: 'destination ports as PORT or PORT/PROTOCOL, e.g. ["80", "53/UDP"]' },
        },
      },
      response: {
        200: {
          type: 'object',
          required: ['revision', 'pods', 'matrices'],
          properties: {
            revision: { type: 'integer' },
            pods: { type: 'array', items: { type: 'string' } },
            matrices: {
              type: 'array',
              items: {
                type: 'object', required: ['protocol', 'port', 'rows'],
                properties: { protocol: { type: 'string' }, port: { type: 'integer' }, rows: { type: 'array', items: { type: 'string' } } },
              },
            },
          },
        },
        ...errorResponses,
      },
    },
  }, async (request) => {
    const where = 'POST /v1/matrix body';
    const { namespace, selector } = request.body;
    const ports = request.body.ports.map((p, i) => parseMatrixPort(p, `${where}: ports[${i}]`));
    const pods = selectPods(engine.state, { namespace, selector, where: `${where}: "selector"` }).map((p) => `${p.namespace}/${p.name}`);
    const cells = pods.length * pods.length * ports.length;
    if (cells > MAX_MATRIX_CELLS) {
      throw new KwpError('KWP_ERR_REQUEST_INVALID', `${where}: ${pods.length} pods × ${pods.length} × ${ports.length} port(s) is ${cells} cells, over the limit of ${MAX_MATRIX_CELLS}; choose a namespace or a selector with fewer pods, or fewer ports`);
    }
    const decider = (): MatrixDecider => {
      const pipeline = engine.active;
      const version = engine.state.version;
      return {
        revision: pipeline.revision,
        allows(flow) {
          const r = resolveFlow(flow, engine.state);
          return pipeline.evaluate(r.packet, r.srcPod, r.dstPod).allowed;
        },
        current: () => engine.active === pipeline && engine.state.version === version,
      };
    };
    return reachabilityMatrix(decider, pods, ports, { where });
  });
}
