/**
 * Review (round 3), [K67]: task binding (task-requests.ts) checked `params.taskId` only when it was
 * a string, so a `tasks/get` naming another principal's task by a number (or any other JSON type)
 * went up untouched, and an upstream whose lookup coerces (a plain object keyed by id, SQLite TEXT
 * affinity) handed bob alice's task. Now every task id the upstream could read is judged: a
 * non-string id is never owned and goes up as an unknown string id, so the upstream answers its own
 * "unknown task". Fails while a non-string id is forwarded as sent.
 */
import fc from 'fast-check';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';

const PATH = '/tasks/mcp';
let up: ChildProcess;
let issuer: TestIssuer;
let gw: TestGateway;

beforeAll(async () => {
  up = spawn(process.execPath, [join(import.meta.dirname, 'review/task-store-upstream.mjs')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = String((await once(up.stdout!, 'data'))[0]).trim();
  issuer = await startTestIssuer('RS256');
  gw = await startTestGateway({ 'gateway.yaml': gatewayYaml({ log_level: 'warn' }), 'route.yaml': jwtRoute(PATH, url, issuer) });
}, 30_000);
afterAll(async () => {
  up?.kill('SIGKILL');
  await gw?.stop();
  await issuer?.close();
});

async function rpc(sub: string, method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
  const token = await issuer.mint({ aud: resourceOf(PATH), sub });
  const res = await fetch(`${gw.url}${PATH}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return (await res.json()) as Record<string, unknown>;
}

describe("[K67] another principal's task named by a non-string id gets the unknown-task answer", () => {
  it('alice creates a task; bob asks for it by its string id, by a number and by an array', async () => {
    const created = await rpc('alice', 'tools/call', { name: 'report', arguments: { salary: 123456 }, task: { ttl: 60_000 } });
    const taskId = ((created.result as { task: { taskId: string } }).task).taskId;
    const asString = await rpc('bob', 'tasks/result', { taskId });
    const asNumber = await rpc('bob', 'tasks/result', { taskId: Number(taskId) });
    const asArray = await rpc('bob', 'tasks/get', { taskId: [taskId] });
    for (const answer of [asArray, asString, asNumber]) {
      expect(answer).toHaveProperty('error');
      expect(JSON.stringify(answer)).not.toContain('123456');
    }
  }, 30_000);

  it('property: no JSON value spelling a task id (number, string in arrays or objects, boolean) reaches the task', async () => {
    const created = await rpc('alice', 'tools/call', { name: 'report', arguments: { salary: 654321 }, task: { ttl: 60_000 } });
    const taskId = ((created.result as { task: { taskId: string } }).task).taskId;
    const spelling = fc.oneof(
      fc.constant<unknown>(Number(taskId)),
      fc.constant<unknown>([taskId]),
      fc.constant<unknown>([[taskId]]),
      fc.constant<unknown>(Number(taskId) + 0.0),
      fc.constant<unknown>({ toString: taskId }),
      fc.boolean(),
      fc.integer({ min: 0, max: 20 }),
      fc.array(fc.integer({ min: 0, max: 20 }).map(String), { minLength: 1, maxLength: 2 }),
    );
    await fc.assert(
      fc.asyncProperty(spelling, fc.constantFrom('tasks/get', 'tasks/result', 'tasks/cancel'), async (id, method) => {
        const answer = await rpc('bob', method, { taskId: id });
        expect(answer).toHaveProperty('error');
        expect(JSON.stringify(answer)).not.toMatch(/salary/);
      }),
      { numRuns: 30 },
    );
    // Alice's own string id still reaches her task (the binding did not refuse everything).
    expect(JSON.stringify(await rpc('alice', 'tasks/result', { taskId }))).toContain('654321');
  }, 60_000);
});
