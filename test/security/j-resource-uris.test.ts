/**
 * SECURITY-CASES J47 (SECURITY.md "One reading of every message"), for the
 * resource URIs that `resources/read` rules judge: a URI reaches the upstream
 * only in its one canonical spelling (src/policy/resource-uri.ts), so no dot
 * segment, escape, case or file: form walks around a glob. Run through the
 * real gateway and a recording upstream on an allow-list route and a
 * deny-list route; what is forwarded is read by Node's WHATWG URL, Python's
 * urllib and Go's net/url, which must resolve it to what the policy judged.
 * URIs live in corpora/resource-uris.json; generated ones in
 * fuzz/resource-uris.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startJsonMcpServer, type JsonMcpServer } from '../integration/policy-harness.js';
import { startJwtStage, stopJwtStage, type JwtStage } from '../helpers/jwt-gateway.js';
import { expectPolicyDenial, expectRejection, gatewayYaml, jwtRoute, resourceOf, simplify } from '../helpers/security-fixtures.js';
import { readCorpus } from './corpora/corpus.js';
import { judgedResource, nodeReading, startUriReaders, type UriReader, type UriReading } from '../helpers/uri-readers.js';

interface CorpusCase {
  uri: string;
  expect: 'refused' | 'forwarded';
  /** forwarded: status on each route. */
  allowList?: number;
  denyList?: number;
  note?: string;
  /** refused: what class of spelling it is. */
  class?: string;
  /** refused: a URI that some reader here resolves it to (the bypass the refusal stops). */
  sameAs?: string;
}
const corpus = readCorpus<{ cases: CorpusCase[] }>('resource-uris.json').cases;
const refused = corpus.filter((c) => c.expect === 'refused');
const forwarded = corpus.filter((c) => c.expect === 'forwarded');

const ALLOW_LIST = '/allow/mcp';
const DENY_LIST = '/deny/mcp';
const TOOLS = '/tools/mcp';
/** The operator's intent: public files and server-everything's resources readable, /etc and secret: never. */
const ALLOW_RULES = [
  { match: { uri: 'file:///etc/**' }, deny: true },
  { match: { uri: 'secret://**' }, deny: true },
  { match: { uri: 'file:///public/**' } },
  { match: { uri: 'test://static/**' } },
  { match: { method: 'resources/read' }, deny: true },
];
const DENY_RULES = [
  { match: { uri: 'file:///etc/**' }, deny: true },
  { match: { uri: 'secret://**' }, deny: true },
];
const NAME_RULES = [
  { match: { method: 'tools/call', tool: 'shell' }, deny: true },
  { match: { method: 'prompts/get', prompt: 'admin' }, deny: true },
];

let stage: JwtStage;
let sdkServer: JsonMcpServer;
let token: string;
let python: UriReader;
let go: UriReader | undefined;

beforeAll(async () => {
  sdkServer = await startJsonMcpServer(['echo', 'shell']);
  stage = await startJwtStage(({ issuer, up }) => ({
    'gateway.yaml': gatewayYaml(),
    'allow.yaml': jwtRoute(ALLOW_LIST, `${up.origin}/mcp`, issuer, { rules: ALLOW_RULES }),
    'deny.yaml': jwtRoute(DENY_LIST, `${up.origin}/mcp`, issuer, { rules: DENY_RULES }),
    'tools.yaml': jwtRoute(TOOLS, sdkServer.url, issuer, { rules: NAME_RULES }),
  }));
  token = await stage.issuer.mint({ aud: [resourceOf(ALLOW_LIST), resourceOf(DENY_LIST), resourceOf(TOOLS)] });
  ({ python, go } = await startUriReaders());
}, 180_000);

afterAll(async () => {
  await Promise.all([python?.close(), go?.close()]);
  await stopJwtStage(stage ?? {});
  await sdkServer?.close();
});

function post(path: string, message: Record<string, unknown>): Promise<Response> {
  return fetch(`http://127.0.0.1:${stage.gw.port}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...message }),
  });
}
const readResource = (path: string, uri: string) => post(path, { method: 'resources/read', params: { uri } });

/** Runs `run`; returns its result and the bodies the recording upstream got meanwhile. */
async function upstreamDuring<T>(run: () => Promise<T>): Promise<{ result: T; seen: Buffer[] }> {
  const before = stage.up.requests.length;
  const result = await run();
  await new Promise((r) => setTimeout(r, 20));
  return { result, seen: stage.up.requests.slice(before).map((r) => r.body) };
}

/** Every reader's view of `uri`: Node's in process, Python's and Go's from their processes. */
async function readings(uri: string): Promise<Array<[string, UriReading]>> {
  return [['node WHATWG URL', nodeReading(uri)], ['python urllib', await python.read(uri)], ...(go ? [['go net/url', await go.read(uri)] as [string, UriReading]] : [])];
}

describe('[J47] resource URIs: corpora/resource-uris.json through the real gateway', () => {
  it('[J47] the corpus holds both kinds, every class the review found, and the probe’s bypasses', () => {
    expect(refused.length).toBeGreaterThan(100);
    expect(forwarded.length).toBeGreaterThan(25);
    const uris = new Set(refused.map((c) => c.uri));
    for (const bypass of [
      'file:///public/../etc/passwd', 'file:///public/%2e%2e/etc/passwd', 'file:///public/..%2fetc/passwd', 'file:///public/..\\etc\\passwd',
      'file:///public/./../etc/passwd', 'FILE:///etc/passwd', 'file://localhost/etc/passwd', 'file:/etc/passwd', 'file:///%65tc/passwd',
      'file:////etc/passwd', 'SECRET://db/password', 'Secret://db/password',
    ]) expect(uris.has(bypass), bypass).toBe(true);
  });

  it('[J47] each refused URI with a `sameAs` really names that resource to a reader here (the refusal stops a real bypass)', async () => {
    const checked = refused.filter((c) => c.sameAs !== undefined);
    expect(checked.length).toBeGreaterThan(30);
    for (const c of checked) {
      const target = judgedResource(c.sameAs!);
      const resources = (await readings(c.uri)).map(([, r]) => r.resource);
      expect(resources, `${c.uri} → ${target}`).toContain(target);
    }
  });

  it.each(refused.map((c) => [c.uri, c] as const))('[J47] refuses %j with 400 invalid_request before any rule, nothing upstream, on both routes', async (_uri, c) => {
    for (const path of [ALLOW_LIST, DENY_LIST]) {
      const { result, seen } = await upstreamDuring(async () => simplify(await readResource(path, c.uri)));
      expectRejection(result, { status: 400, error: 'invalid_request', challenge: 'none' });
      expect(seen, `${path} ${c.class}`).toEqual([]);
    }
  });

  it.each(forwarded.map((c) => [c.uri, c] as const))('[J47] judges %j as written: the rules decide, and what passes reaches the upstream byte for byte', async (_uri, c) => {
    for (const [path, status] of [[ALLOW_LIST, c.allowList], [DENY_LIST, c.denyList]] as const) {
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri: c.uri } });
      const { result, seen } = await upstreamDuring(async () => simplify(await readResource(path, c.uri)));
      expect(result.status, `${path}: ${result.body}`).toBe(status);
      if (status === 200) {
        expect(seen.map((b) => b.toString('utf8'))).toEqual([body]);
      } else {
        expectPolicyDenial(result, [1]);
        expect(seen).toEqual([]);
      }
    }
  });
});

describe('[J47] differential: what the gateway forwards, every reader resolves to what the policy judged', () => {
  it.each(forwarded.map((c) => [c.uri, c] as const))('[J47] %j: WHATWG URL + fileURLToPath, Python urllib + normpath, Go net/url + path.Clean agree with the glob’s string', async (_uri, c) => {
    const judged = judgedResource(c.uri);
    for (const [reader, reading] of await readings(c.uri)) {
      expect(reading.ok, reader).toBe(true);
      expect(reading.serialized, `${reader} writes it back unchanged`).toBe(c.uri);
      expect(reading.normalized, `${reader} normalises nothing away`).toBe(reading.path);
      expect(reading.resource, `${reader} resolves it to what was judged`).toBe(judged);
    }
  });

  it('[J47] the differential check can fail: the probe’s bypasses resolve elsewhere for some reader', async () => {
    for (const uri of ['file:///public/../etc/passwd', 'FILE:///etc/passwd', 'file://localhost/etc/passwd', 'file:////etc/passwd', 'SECRET://db/password']) {
      const resources = (await readings(uri)).map(([, r]) => r.resource);
      expect(resources.some((r) => r !== judgedResource(uri)), uri).toBe(true);
    }
  });
});

describe('[J47] tool and prompt names are plain names, judged as sent', () => {
  it.each([' shell', 'shell ', '\u00a0shell', 'shell\u2003', '\tshell'])('[J47] a tool name with white space around it (%j) → 400, nothing upstream', async (name) => {
    const before = sdkServer.methods.length;
    for (const message of [{ method: 'tools/call', params: { name, arguments: {} } }, { method: 'prompts/get', params: { name: name.replace('shell', 'admin') } }]) {
      expectRejection(await simplify(await post(TOOLS, message)), { status: 400, error: 'invalid_request', challenge: 'none' });
    }
    expect(sdkServer.methods.slice(before)).toEqual([]);
  });

  it('[J47] a case variant of a denied tool is another name: forwarded, and the MCP SDK server runs no tool by it (globs stay case-sensitive)', async () => {
    expectPolicyDenial(await simplify(await post(TOOLS, { method: 'tools/call', params: { name: 'shell', arguments: {} } })), [1]);
    for (const name of ['Shell', 'SHELL', 'ſhell']) {
      const res = await post(TOOLS, { method: 'tools/call', params: { name, arguments: {} } });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      expect(text).not.toContain('shell done');
      expect(text).toMatch(/not found|unknown tool/i);
    }
  });
});
