// Objects from a Kubernetes API server were validated by it, yet an
// evaluator can still be unable to use one: the network-policy-api CRDs
// leave a label selector's operator free text, so an AdminNetworkPolicy
// whose subject says `operator: Frobnicate` is stored by the API server and
// selects no pod in the evaluator. The agent says so in a log line naming
// the object and in kwp_objects_rejected, until the object is fixed. A real
// agent child process (npm run build first) against the API-server emulator
// over real HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiServerEmulator } from '../test/apiserver/emulator.js';
import { writeKubeconfig } from '../test/apiserver/kubeconfig.js';
import { adminNetworkPolicy, namespace, pod } from '../test/apiserver/fixtures.js';
import { AgentProcess } from '../test/fixtures/agent-process.js';
import type { KubeObject } from './contract.js';

let api: ApiServerEmulator;
let agent: AgentProcess;

function oddOperator(operator: string): KubeObject {
  const anp = adminNetworkPolicy('odd-operator', 5);
  anp.spec.subject = { namespaces: { matchExpressions: [{ key: 'team', operator, values: ['a'] }] } };
  return anp;
}

async function rejectedLines(): Promise<string[]> {
  const text = await (await agent.call('/metrics')).text();
  return text.split('\n').filter((l) => l.startsWith('kwp_objects_rejected{'));
}

beforeAll(async () => {
  api = await ApiServerEmulator.start();
  api.create(namespace('x', { team: 'a' }));
  api.create(pod('x', 'a', { app: 'web' }, '10.0.0.1'));
  api.create(oddOperator('Frobnicate'));
  agent = await AgentProcess.start(['--kubeconfig', await writeKubeconfig({ server: api.url })]);
}, 120_000);

afterAll(async () => {
  await agent?.stop();
  await api?.stop();
});

describe('an object the API server accepted and an evaluator cannot use', () => {
  it('is a log line naming the object and a kwp_objects_rejected series, until the object is fixed', async () => {
    const line = await agent.logLine((e) => (e.rejected as { name?: string } | undefined)?.name === 'odd-operator');
    expect(line).toMatchObject({ level: 40, module: 'admin-network-policy', rejected: { kind: 'AdminNetworkPolicy', name: 'odd-operator' } });
    expect(line.msg).toMatch(/^module admin-network-policy cannot use AdminNetworkPolicy odd-operator: AdminNetworkPolicy "odd-operator": spec.subject.namespaces: matchExpressions\[0\].operator "Frobnicate" is not one of In, NotIn, Exists, DoesNotExist; the policy selects no pod$/);
    expect(await rejectedLines()).toContain(`kwp_objects_rejected{stage="${line.stage}",module="admin-network-policy",kind="AdminNetworkPolicy"} 1`);

    api.update(oddOperator('In'));
    let lines = await rejectedLines();
    for (const until = Date.now() + 60_000; lines.length && Date.now() < until;) {
      await new Promise((r) => setTimeout(r, 100));
      lines = await rejectedLines();
    }
    expect(lines).toEqual([]);
  }, 120_000);
});
