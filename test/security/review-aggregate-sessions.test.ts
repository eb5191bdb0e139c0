/**
 * Review (round 3), aggregation branch (written against `aggregate`, run from an archive of it):
 * the aggregated route's session caps (aggregate-forwarder.ts: 16 per principal, 10 000 per route)
 * are checked before the upstream sessions are opened (an await) and counted only after, so
 * concurrent initializes of one client all pass; and the principal is [issuer, sub, client_id], so
 * a user's clients each have 16. One user can take the route's 10 000 sessions: 503 for everyone
 * else for 30 minutes (the idle sweep).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';
import { startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';

const PATH = '/all/mcp';
const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } });
let up: ScriptedUpstream;
let stage: StdioStage;

beforeAll(async () => {
  up = await startScriptedUpstream({ sessions: true });
  stage = await startStdioStage({ [PATH]: { upstreams: { one: { upstream: up.url } } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await up?.close();
});

async function initialize(sub: string, clientId: string): Promise<number> {
  const token = await stage.issuer.token({ audience: stage.gw.config.routes.find((r) => r.path === PATH)!.resource, sub, clientId, scope: 'mcp:read' });
  const res = await fetch(stage.url(PATH), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: INIT });
  await res.arrayBuffer();
  return res.status;
}

describe('review: aggregated route session caps', () => {
  it('64 concurrent initializes of one client: at most 16 sessions', async () => {
    const statuses = await Promise.all(Array.from({ length: 64 }, () => initialize('mallory', 'app-1')));
    const made = statuses.filter((s) => s === 200).length;
    console.log({ concurrentMade: made });
    expect(made).toBeLessThanOrEqual(16);
  }, 60_000);

  it('one user, three clients, one at a time: at most 16 sessions for the user', async () => {
    let made = 0;
    for (const client of ['app-2', 'app-3', 'app-4']) for (let i = 0; i < 16; i++) if ((await initialize('trudy', client)) === 200) made++;
    console.log({ perUserMade: made });
    expect(made).toBeLessThanOrEqual(16);
  }, 60_000);
});
