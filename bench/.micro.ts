import { generateKeyPair, SignJWT } from 'jose';
import { sha256Base64Url } from '../src/auth/hash.js';
import { Metrics } from '../src/observability/metrics.js';
import { compilePolicy } from '../src/policy/route-policy.js';
import { evaluate } from '../src/policy/evaluate.js';
import { parseJsonRpcBody } from '../src/policy/json-rpc.js';
import { createPolicyStep } from '../src/policy/policy-step.js';
import { buildUpstreamHeaders, filterResponseHeaders } from '../src/proxy/headers.js';
import { extractBearerToken } from '../src/auth/bearer.js';
import { parseRequestTarget } from '../src/proxy/request-target.js';
import { TokenCache } from '../src/auth/token-cache.js';

function bench(name: string, fn: () => unknown, n = 200_000) {
  for (let i = 0; i < 20_000; i++) fn();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) fn();
  const ns = Number(process.hrtime.bigint() - t0) / n;
  console.log(name.padEnd(58), (ns / 1000).toFixed(2), 'µs');
}
async function benchAsync(name: string, fn: () => Promise<unknown>, n = 200_000) {
  for (let i = 0; i < 20_000; i++) await fn();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await fn();
  console.log(name.padEnd(58), (Number(process.hrtime.bigint() - t0) / n / 1000).toFixed(2), 'µs');
}
const { privateKey } = await generateKeyPair('RS256');
const token = await new SignJWT({ scope: 'mcp:read mcp:write', client_id: 'bench-client' }).setProtectedHeader({ alg: 'RS256', kid: 'bench-key-1', typ: 'at+jwt' }).setIssuer('http://127.0.0.1:40000').setAudience('http://127.0.0.1:8080/mcp').setSubject('bench-user').setIssuedAt().setExpirationTime('2h').sign(privateKey);
console.log('token length', token.length);
bench('sha256Base64Url(token)  [token-cache.ts key]', () => sha256Base64Url(token));
const m = new Metrics({ defaultMetrics: false });
bench("requests.labels(route, String(200), 'allow').inc()", () => m.requests.labels('/mcp', String(200), 'allow').inc());
const child = m.requests.labels('/mcp', '200', 'allow');
bench('cached child .inc()', () => child.inc());
const hist = m.duration.labels('/mcp');
bench('duration.observe(x)', () => hist.observe(0.0012));
const route = { path: '/mcp', file: 'mcp.yaml', requiredScopes: ['mcp:read'], rules: [], filterToolsList: false } as never;
const policy = compilePolicy(route);
const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }));
const auth = { issuer: 'i', subject: 'bench-user', clientId: 'bench-client', scopes: ['mcp:read', 'mcp:write'], expiresAt: 2e9, claims: {}, token, tokenHash: 'x' };
bench('parseJsonRpcBody(body)', () => parseJsonRpcBody(body));
const parsed = parseJsonRpcBody(body);
bench('evaluate(policy no rules, tools/list)', () => evaluate(policy, parsed, auth));
const step = createPolicyStep(route, { audit: { record: () => undefined } });
const req = { method: 'POST', headers: { 'content-type': 'application/json' } };
bench('policyStep.check (audit none)', () => step.check(req, body, auth));
const raw = ['Host', '127.0.0.1:1', 'Connection', 'keep-alive', 'content-type', 'application/json', 'accept', 'application/json, text/event-stream', 'mcp-protocol-version', '2025-06-18', 'authorization', `Bearer ${token}`, 'Content-Length', '58'];
bench('buildUpstreamHeaders(raw)', () => buildUpstreamHeaders(raw, { hostHeader: '127.0.0.1:2', injected: { authorization: 'Bearer x' } }));
const resHeaders = { 'content-type': 'application/json', 'content-length': '333', date: 'Sat, 22 Nov 2026 06:00:00 GMT', connection: 'keep-alive', 'keep-alive': 'timeout=5' };
bench('filterResponseHeaders(upstream headers)', () => filterResponseHeaders(resHeaders));
bench('extractBearerToken(raw, "")', () => extractBearerToken(raw, ''));
bench("parseRequestTarget('/mcp')", () => parseRequestTarget('/mcp'));
const cache = new TokenCache();
await cache.verify(token, 'r', 60_000, async () => auth);
await benchAsync('TokenCache.verify (hit, incl. await)', () => cache.verify(token, 'r', 60_000, async () => auth));
bench('new Set(scopes) + every()', () => { const g = new Set(auth.scopes); return ['mcp:read'].every((s) => g.has(s)); });
