/**
 * Fixtures for the gateway security suites (test/security): an issuer whose tokens the tests mint
 * with jose (any header, any claims, validly signed or not), a recording upstream that answers by
 * itself and proves what reached it, gateway configuration builders, and one assertion for a
 * rejection (status, JSON `error`, `WWW-Authenticate` shape, no token echo).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTHeaderParameters, type JWTPayload } from 'jose';
import { expect } from 'vitest';
import { PUBLIC_URL } from './gateway-config.js';
import { closeServer, listen } from './net.js';
import { headerOf } from './raw-http.js';

export type SigningAlg = 'RS256' | 'ES256';

export interface TestIssuer {
  /** `http://127.0.0.1:<port>` (never fetched by the gateway: routes name `jwksUri`). */
  issuer: string;
  jwksUri: string;
  alg: SigningAlg;
  kid: string;
  publicJwk: JWK;
  publicKey: CryptoKey;
  privateKey: CryptoKey;
  /** How many times the JWKS was served (or refused while `available` is false). */
  jwksFetches: number;
  /** false: the JWKS endpoint answers 500. */
  available: boolean;
  /** A signed JWT: default claims (iss, sub alice, client_id, iat, exp +5 min, scope) merged with `claims`. */
  mint(claims?: JWTPayload, opts?: MintOptions): Promise<string>;
  close(): Promise<void>;
}

export interface MintOptions {
  /** Header parameters merged over `{ alg, kid, typ: 'at+jwt' }`. */
  header?: Partial<JWTHeaderParameters> & Record<string, unknown>;
  /** Claim names removed from the defaults. */
  omit?: string[];
  /** Sign with this key instead of the issuer's (a forgery). */
  key?: CryptoKey | Uint8Array;
}

export const now = () => Math.floor(Date.now() / 1000);

export async function startTestIssuer(alg: SigningAlg = 'RS256'): Promise<TestIssuer> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = randomUUID();
  const publicJwk: JWK = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  const server = createServer((req, res) => {
    if (req.url !== '/jwks.json') return res.writeHead(404).end();
    handle.jwksFetches += 1;
    if (!handle.available) return res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"down"}');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [publicJwk] }));
  });
  const port = await listen(server);
  const issuer = `http://127.0.0.1:${port}`;
  const handle: TestIssuer = {
    issuer,
    jwksUri: `${issuer}/jwks.json`,
    alg,
    kid,
    publicJwk,
    publicKey,
    privateKey,
    jwksFetches: 0,
    available: true,
    async mint(claims = {}, opts = {}) {
      const defaults: JWTPayload = {
        iss: issuer,
        sub: 'alice',
        client_id: 'client-a',
        iat: now(),
        exp: now() + 300,
        scope: 'mcp:read mcp:write',
        jti: randomBytes(8).toString('hex'),
      };
      for (const name of opts.omit ?? []) delete defaults[name];
      const payload = { ...defaults, ...claims };
      for (const name of opts.omit ?? []) delete payload[name];
      const header = { alg, kid, typ: 'at+jwt', ...opts.header } as JWTHeaderParameters;
      return new SignJWT(payload).setProtectedHeader(header).sign(opts.key ?? privateKey);
    },
    close: () => closeServer(server),
  };
  return handle;
}

export interface RecordedRequest {
  method: string;
  /** path + query as received */
  url: string;
  headers: Array<[string, string]>;
  body: Buffer;
}

export interface RecordingUpstream {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  requests: RecordedRequest[];
  /** Responses the upstream had not finished when the gateway closed them (client aborts passed on). */
  cutShort: string[];
  /** Everything every request carried (request line, headers, body) as one string: search it for a token. */
  everything(): string;
  headerValues(name: string): string[];
  close(): Promise<void>;
}

/**
 * An upstream that answers by itself and records every request. Behaviour by path:
 * - `/mcp`: a JSON-RPC echo (`initialize` answers with a fresh `Mcp-Session-Id`); GET opens an
 *   event stream that sends one event and stays open; DELETE answers 200.
 * - `/sse?events=N&gap=MS`: an event stream of N events, MS apart.
 * - `/challenge`: 401 with a challenge naming the upstream's own AS; `/forbidden`: 403 likewise.
 * - `/hostile-headers`: 200 with hop-by-hop, cookie, CORS and challenge headers a proxy must drop.
 */
export async function startRecordingUpstream(): Promise<RecordingUpstream> {
  const requests: RecordedRequest[] = [];
  const cutShort: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Array<[string, string]> = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
      const record = { method: req.method ?? '', url: req.url ?? '', headers, body: Buffer.concat(chunks) };
      requests.push(record);
      res.on('close', () => {
        if (!res.writableFinished) cutShort.push(record.url);
      });
      answer(req, res, record.body);
    });
  });
  const port = await listen(server);
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    requests,
    cutShort,
    everything: () =>
      requests.map((r) => `${r.method} ${r.url}\n${r.headers.map(([n, v]) => `${n}: ${v}`).join('\n')}\n\n${r.body.toString('latin1')}`).join('\n'),
    headerValues: (name) => requests.flatMap((r) => r.headers.filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => v)),
    close: () => closeServer(server),
  };
}

function answer(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  const url = new URL(req.url ?? '/', 'http://upstream');
  switch (url.pathname) {
    case '/mcp':
      return mcpEcho(req, res, body);
    case '/sse': {
      const events = Number(url.searchParams.get('events') ?? 3);
      const gap = Number(url.searchParams.get('gap') ?? 100);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.flushHeaders();
      let sent = 0;
      const tick = () => {
        if (res.destroyed) return;
        res.write(`id: ${sent}\nevent: message\ndata: {"n":${sent},"at":${Date.now()}}\n\n`);
        if (++sent >= events) return res.end();
        setTimeout(tick, gap);
      };
      setTimeout(tick, gap);
      return;
    }
    case '/challenge':
    case '/forbidden':
      res.writeHead(url.pathname === '/challenge' ? 401 : 403, {
        'content-type': 'application/json',
        'www-authenticate': 'Bearer realm="upstream", resource_metadata="https://evil-as.example/.well-known/oauth-protected-resource", authorization_uri="https://evil-as.example/authorize"',
      });
      return void res.end('{"error":"invalid_token","error_description":"login at https://evil-as.example"}');
    case '/hostile-headers':
      res.writeHead(200, [
        ['Content-Type', 'application/json'],
        ['Connection', 'x-upstream-private, keep-alive'],
        ['X-Upstream-Private', 'secret'],
        ['Keep-Alive', 'timeout=5'],
        ['Set-Cookie', 'session=upstream; Path=/'],
        ['Proxy-Authenticate', 'Basic realm="up"'],
        ['WWW-Authenticate', 'Bearer realm="up"'],
        ['Access-Control-Allow-Origin', '*'],
        ['Access-Control-Allow-Credentials', 'true'],
        ['X-Upstream-Ok', 'kept'],
      ]);
      return void res.end('{"jsonrpc":"2.0","id":1,"result":{}}');
    default:
      res.writeHead(404, { 'content-type': 'application/json' });
      return void res.end('{"error":"upstream_not_found"}');
  }
}

function mcpEcho(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
  if (req.method === 'DELETE') return void res.writeHead(200).end();
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(`id: 1\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"lastEventId":${JSON.stringify(req.headers['last-event-id'] ?? null)}}}\n\n`);
    return; // stays open until the client (or gateway) closes it
  }
  let message: { id?: unknown; method?: unknown } = {};
  try {
    message = JSON.parse(body.toString('utf8')) as typeof message;
  } catch {
    // not JSON: echoed as a null id
  }
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (message.method === 'initialize') headers['mcp-session-id'] = randomUUID();
  res.writeHead(200, headers).end(JSON.stringify({ jsonrpc: '2.0', id: message.id ?? null, result: { method: message.method ?? null } }));
}

// --- gateway configuration ---------------------------------------------------

export { gatewayYaml, PUBLIC_URL } from './gateway-config.js';

/** A route trusting `issuer`'s JWTs (RS256 pinned unless `algorithms` says otherwise). */
export function jwtRoute(path: string, upstream: string, issuer: Pick<TestIssuer, 'issuer' | 'jwksUri' | 'alg'>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    path,
    upstream,
    authorization_servers: [issuer.issuer],
    token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: [issuer.alg] } },
    scopes_supported: ['mcp:read', 'mcp:write'],
    required_scopes: ['mcp:read'],
    ...extra,
  };
}

export const resourceOf = (path: string) => `${PUBLIC_URL}${path}`;
export const metadataUrlOf = (path: string) => `${PUBLIC_URL}/.well-known/oauth-protected-resource${path}`;

// --- assertions ----------------------------------------------------------------

export interface SimpleResponse {
  status: number;
  header(name: string): string | undefined;
  body: string;
}

export async function simplify(res: Response): Promise<SimpleResponse> {
  const body = await res.text();
  return { status: res.status, header: (n) => res.headers.get(n) ?? undefined, body };
}

export function simplifyRaw(res: { status: number; headers: Array<[string, string]>; body: string }): SimpleResponse {
  return { status: res.status, header: (n) => headerOf(res, n), body: res.body };
}

/** `Bearer a="b", c="d"` → { scheme, params } (quoted-string unescaping); throws on anything else. */
export function parseChallenge(value: string): { scheme: string; params: Record<string, string> } {
  const m = /^(\S+)(?: (.*))?$/.exec(value);
  if (!m) throw new Error(`not a challenge: ${value}`);
  const params: Record<string, string> = {};
  const re = /\s*([A-Za-z_][A-Za-z0-9_-]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)/y;
  const rest = m[2] ?? '';
  let consumed = 0;
  for (let match = re.exec(rest); match; match = re.exec(rest)) {
    const name = match[1]!;
    if (name in params) throw new Error(`duplicate challenge parameter ${name}: ${value}`);
    params[name] = match[2]!.replace(/\\(.)/g, '$1');
    consumed = re.lastIndex;
  }
  if (consumed !== rest.length) throw new Error(`unparseable challenge: ${value}`);
  return { scheme: m[1]!, params };
}

export interface ExpectedRejection {
  status: number;
  /** The JSON body's `error` (undefined: any). */
  error?: string;
  /**
   * `bare`: `Bearer resource_metadata=…` without `error` (no token); `error`: with error=<error>;
   * `none`: no WWW-Authenticate; undefined: not checked.
   */
  challenge?: 'bare' | 'error' | 'none';
  /** The challenge's auth-scheme (default `Bearer`; `DPoP` for RFC 9449 refusals). */
  scheme?: 'Bearer' | 'DPoP';
  resourceMetadata?: string;
  /** Expected `scope` parameter; null: must be absent. */
  scope?: string | null;
}

/** Asserts a JSON error answer that never echoes `secrets` (the presented token, its parts). */
export function expectRejection(res: SimpleResponse, want: ExpectedRejection, secrets: readonly string[] = []): void {
  expect(res.status, res.body).toBe(want.status);
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(res.body) as Record<string, unknown>;
  } catch {
    throw new Error(`error body is not JSON: ${JSON.stringify(res.body.slice(0, 300))}`);
  }
  expect(Object.keys(json).sort()).toEqual(['error', 'error_description']);
  if (want.error !== undefined) expect(json.error).toBe(want.error);
  expect(typeof json.error).toBe('string');
  expect(typeof json.error_description).toBe('string');
  expect(res.body).not.toMatch(/\n\s+at |Error:|node_modules/);
  const challenge = res.header('www-authenticate');
  for (const secret of secrets.filter((s) => s.length >= 8)) {
    expect(res.body.includes(secret), 'body echoes the token').toBe(false);
    expect(challenge?.includes(secret) ?? false, 'challenge echoes the token').toBe(false);
  }
  if (want.challenge === undefined) return;
  if (want.challenge === 'none') {
    expect(challenge).toBeUndefined();
    return;
  }
  expect(challenge, 'WWW-Authenticate').toBeDefined();
  const { scheme, params } = parseChallenge(challenge!);
  expect(scheme).toBe(want.scheme ?? 'Bearer');
  if (want.resourceMetadata !== undefined) expect(params.resource_metadata).toBe(want.resourceMetadata);
  if (want.challenge === 'bare') {
    expect(params.error).toBeUndefined();
    expect(params.error_description).toBeUndefined();
  } else {
    expect(params.error).toBe(want.error ?? json.error);
  }
  if (want.scope === null) expect(params.scope).toBeUndefined();
  else if (want.scope !== undefined) expect(params.scope).toBe(want.scope);
}

/** Splits a compact JWT into the parts that must never be echoed (whole token, signature, payload). */
export function tokenSecrets(token: string): string[] {
  const parts = token.split('.');
  return [token, ...parts.filter((p) => p.length >= 16)];
}

/**
 * Asserts a refusal by a rule no scope lifts (DESIGN §4, §8.4): 403, no challenge, and a JSON-RPC
 * error body saying denied by policy for each id in `ids` (a batch: an array, in that order).
 */
export function expectPolicyDenial(res: SimpleResponse, ids: ReadonlyArray<string | number | null>, batch = false): void {
  expect(res.status, res.body).toBe(403);
  expect(res.header('www-authenticate')).toBeUndefined();
  expect(res.body).not.toContain('insufficient_scope');
  const parsed = JSON.parse(res.body) as unknown;
  const errors = (batch ? parsed : [parsed]) as Array<Record<string, unknown>>;
  expect(Array.isArray(errors)).toBe(true);
  expect(errors.map((e) => e.id)).toEqual(ids);
  for (const e of errors) {
    expect(Object.keys(e).sort()).toEqual(['error', 'id', 'jsonrpc']);
    expect(e.jsonrpc).toBe('2.0');
    expect(e.error).toEqual({ code: -32003, message: expect.stringMatching(/^denied by policy: /) as unknown, data: { error: 'access_denied' } });
  }
}
