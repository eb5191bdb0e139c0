/**
 * [H34] [H35] [H38] Property tests of header hygiene (src/proxy/headers.ts): whatever headers a
 * client sends — in any letter case, with underscores, with a Connection header naming anything —
 * no hop-by-hop, credential or identity header reaches the upstream, the injected credential always
 * does (once, with its value, unremovable), and every ordinary header passes unchanged and in order.
 * And on the way back: no hop-by-hop, challenge, cookie or CORS header from the upstream.
 * [J47] `Mcp-Name` values the gateway accepts mean one name to every reader: a UTF-8 reader of the
 * header bytes and a lenient `=?…?=` decoder read what the gateway compared.
 * [J50] And read as a CGI, WSGI or Rack upstream reads them (`HTTP_` + upper case, `-` → `_`), the
 * forwarded headers carry exactly the session id, method and name that Node handed the gateway.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { parseJsonRpcBody } from '../../../src/policy/json-rpc.js';
import { checkMcpHeaders, decodeHeaderValue } from '../../../src/policy/mcp-headers.js';
import { buildUpstreamHeaders, filterResponseHeaders } from '../../../src/proxy/headers.js';
import { buildRequest, rawRequest } from '../../helpers/raw-http.js';
import { fuzz } from './harness.js';

/** RFC 9110 §7.6.1 hop-by-hop headers and the de-facto ones. */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'];
/** Credentials and identity an upstream might trust (SECURITY-CASES H34, H35). */
const NEVER_FORWARDED = [
  ...HOP_BY_HOP,
  'authorization', 'proxy-authorization', 'cookie', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto',
  'x-forwarded-user', 'x-forwarded-email', 'x-forwarded-access-token', 'x-auth-request-user', 'x-auth-request-email',
  'x-authenticated-user', 'x-remote-user', 'x-real-ip', 'x-user', 'x-email', 'remote-user', 'x-original-url', 'proxy-foo',
  // Second review (finding 3): DPoP, RFC 9440 and the identity-aware proxies' headers.
  'dpop', 'client-cert', 'client-cert-chain', 'x-ms-client-principal', 'x-ms-client-principal-name', 'x-ms-token-aad-id-token',
  'cf-access-jwt-assertion', 'cf-access-authenticated-user-email', 'x-amzn-oidc-identity', 'x-amzn-oidc-data', 'x-goog-authenticated-user-email',
  'x-goog-iap-jwt-assertion', 'x-pomerium-jwt-assertion', 'x-pomerium-claim-email', 'x-webauth-user', 'x-ssl-client-cert', 'x-ssl-client-s-dn',
  'ssl-client-cert', 'x-client-cert', 'x-client-cert-chain', 'x-consumer-username', 'x-consumer-id', 'x-userinfo', 'x-access-token', 'x-id-token',
  'gap-auth', 'x-auth-request-groups', 'remote-groups', 'x-remote-group', 'x-authentik-username', 'x-vouch-user', 'x-endpoint-api-userinfo',
  // Third review: Tailscale serve, Teleport, forwarded JWT payloads, Cloud Run.
  'tailscale-user-login', 'tailscale-app-capabilities', 'teleport-jwt-assertion', 'x-jwt-payload', 'x-jwt-assertion', 'x-serverless-authorization',
];
const NEVER_FORWARDED_PREFIX =
  /^(?:proxy-|x-forwarded-|x-auth-|x-ms-client-principal|x-ms-token-|cf-access-|x-amzn-oidc-|x-goog-(?:authenticated|iap)-|x-pomerium-|x-webauth-|x-ssl-|ssl-client-|x-client-cert|x-consumer-|remote-|x-remote-|tailscale-|teleport-|x-jwt-)/;
/** Headers an MCP client legitimately sends: they must pass unless a Connection header names them. */
const ORDINARY = ['content-type', 'accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id', 'user-agent', 'x-request-id', 'x-custom', 'mcp-method', 'mcp-name'];
const INJECTABLE = ['authorization', 'x-api-key', 'x-upstream-token', 'proxy-authorization', 'x-forwarded-user'];

/** A name in a random letter case, sometimes with `_` for `-` (CGI reads them alike). */
const spelled = (names: readonly string[]) =>
  fc.tuple(fc.constantFrom(...names), fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }), fc.boolean()).map(([name, upper, underscore]) => {
    const cased = [...name].map((ch, i) => (upper[i] ? ch.toUpperCase() : ch)).join('');
    return underscore ? cased.replaceAll('-', '_') : cased;
  });
const value = fc.stringMatching(/^[\x21-\x7E][\x20-\x7E]{0,30}$/);
const connectionValue = fc
  .array(fc.oneof(spelled([...ORDINARY, ...NEVER_FORWARDED, ...INJECTABLE]), fc.constantFrom('close', 'keep-alive', '', ' ')), { maxLength: 4 })
  .map((tokens) => tokens.join(', '));
const header = fc.oneof(
  fc.tuple(spelled(NEVER_FORWARDED), value),
  fc.tuple(spelled(ORDINARY), value),
  fc.tuple(spelled(INJECTABLE), value),
  fc.tuple(spelled(['connection']), connectionValue),
  fc.tuple(fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/), value),
);
const injected = fc.uniqueArray(fc.constantFrom(...INJECTABLE), { maxLength: 2 }).chain((names) =>
  fc.tuple(...names.map(() => value)).map((values) => Object.fromEntries(names.map((n, i) => [n, values[i]!]))),
);

const normalised = (name: string) => name.toLowerCase().replaceAll('_', '-');
const neverForwarded = (name: string) => NEVER_FORWARDED.includes(normalised(name)) || NEVER_FORWARDED_PREFIX.test(normalised(name)) || normalised(name) === 'host';

describe('[H34] [H35] [H38] request headers to the upstream', () => {
  fuzz(
    'upstream headers: no hop-by-hop or credential header survives; injected ones always do; the rest is kept in order',
    () =>
      fc.property(fc.array(header, { maxLength: 14 }), injected, (pairs, credential) => {
        const raw = pairs.flat();
        const out = buildUpstreamHeaders(raw, { hostHeader: 'upstream.test:8443', injected: credential });
        const outPairs = Array.from({ length: out.length / 2 }, (_, i) => [out[2 * i]!, out[2 * i + 1]!] as const);

        // Host first and once: the upstream's own authority.
        expect(outPairs[0]).toEqual(['host', 'upstream.test:8443']);
        expect(outPairs.filter(([n]) => normalised(n) === 'host')).toHaveLength(1);

        // Every injected header exactly once, with its value, after every client header.
        for (const [name, v] of Object.entries(credential)) {
          const found = outPairs.filter(([n]) => normalised(n) === name);
          expect(found).toEqual([[name, v]]);
        }
        const clientPart = outPairs.slice(1, outPairs.length - Object.keys(credential).length);
        expect(outPairs.slice(outPairs.length - Object.keys(credential).length).map(([n]) => n)).toEqual(Object.keys(credential));

        // No hop-by-hop, credential or identity header from the client; nothing its Connection header named.
        const named = new Set(pairs.filter(([n]) => n.toLowerCase() === 'connection').flatMap(([, v]) => v.split(',').map((t) => t.trim().toLowerCase())));
        for (const [name] of clientPart) {
          expect(neverForwarded(name), `${name} was forwarded`).toBe(false);
          expect(named.has(name), `${name} was named by Connection`).toBe(false);
          expect(normalised(name) in credential, `${name} shadows the credential`).toBe(false);
        }

        // Ordinary headers pass unchanged and in order (unless Connection names them or they shadow the credential).
        const kept = pairs.filter(([n]) => ORDINARY.includes(n.toLowerCase()) && !named.has(n.toLowerCase()));
        const ordinaryOut = clientPart.filter(([n]) => ORDINARY.includes(n));
        expect(ordinaryOut).toEqual(kept.map(([n, v]) => [n.toLowerCase(), v]));
      }),
    { numRuns: 1500 },
  );
});

describe('[H36] [H38] response headers to the client', () => {
  const RESPONSE_DROPPED = [...HOP_BY_HOP, 'proxy-authenticate', 'www-authenticate', 'set-cookie'];
  const responseName = fc.oneof(
    fc.constantFrom(...RESPONSE_DROPPED, 'access-control-allow-origin', 'access-control-allow-credentials', 'access-control-expose-headers'),
    fc.constantFrom('content-type', 'mcp-session-id', 'cache-control', 'x-upstream', 'etag', '__proto__', 'constructor', 'hasownproperty'),
    fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/),
  );
  const responseValue = fc.oneof(value, fc.array(value, { minLength: 1, maxLength: 3 }));

  fuzz(
    'response headers: no hop-by-hop, challenge, cookie or CORS header reaches the client',
    () =>
      fc.property(fc.array(fc.tuple(responseName, responseValue), { maxLength: 10 }), fc.option(connectionValue.map((v) => v.toLowerCase()), { nil: undefined }), (pairs, connection) => {
        const input: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
        for (const [n, v] of pairs) input[n] = v;
        if (connection !== undefined) input.connection = connection;
        // What the final Connection header names, whichever of the pairs or the option set it (any case, one or several values).
        const declared = input.connection === undefined ? [] : [input.connection].flat();
        const named = new Set(declared.flatMap((v) => v.split(',')).map((t) => t.trim().toLowerCase()).filter(Boolean));
        const out = filterResponseHeaders(input);
        for (const name of Object.keys(out)) {
          expect(RESPONSE_DROPPED.includes(name), name).toBe(false);
          expect(name.startsWith('access-control-'), name).toBe(false);
          expect(named.has(name), name).toBe(false);
        }
        for (const [name, v] of Object.entries(input)) {
          const shouldPass = !RESPONSE_DROPPED.includes(name) && !name.startsWith('access-control-') && !named.has(name);
          if (shouldPass) expect(out[name]).toEqual(v);
        }
      }),
    { numRuns: 1000 },
  );
});

describe('[J47] Mcp-Name values have one reading', () => {
  /** Header bytes as Node hands them over: one char per byte. */
  const bytesOf = (text: string) => Buffer.from(text, 'utf8').toString('latin1');
  const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
  /**
   * A lenient upstream: reads the header bytes as UTF-8, takes the markers in any case, `b` for
   * `base64` and an RFC 2047 charset word, forgives whitespace, URL-safe letters and missing padding,
   * and decodes UTF-8 without complaint (dropping a byte-order mark, as TextDecoder does).
   */
  function lenientReading(raw: string): string {
    const text = Buffer.from(raw, 'latin1').toString('utf8');
    const sentinel = /^=\?(?:[^?]*\?)?(?:base64|b)\?([^?]*)\?=$/i.exec(text.trim());
    return sentinel ? new TextDecoder().decode(Buffer.from(sentinel[1]!.replace(/\s/g, ''), 'base64')) : text;
  }
  /** Whether the whole gateway accepts `raw` as the Mcp-Name of a tools/call naming `name`. */
  function gatewayAccepts(raw: string, name: string): boolean {
    try {
      const request = parseJsonRpcBody(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name } })));
      checkMcpHeaders({ 'mcp-method': 'tools/call', 'mcp-name': raw }, request);
      return true;
    } catch {
      return false;
    }
  }
  const anyName = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 12 }), fc.stringMatching(/^[\x20-\x7E]{0,12}$/), fc.constantFrom('shell', 'café', '=?x', ' a '));
  const payload = anyName.chain((name) =>
    fc.constantFrom(
      b64(name),
      b64(name).replace(/=+$/, ''),
      b64(name).replaceAll('+', '-').replaceAll('/', '_'),
      `${b64(name).slice(0, 2)} ${b64(name).slice(2)}`,
      `${b64(name)}=`,
      b64(name).replace(/.(=*)$/, 'A$1'),
      b64(`\ufeff${name}`),
    ),
  );
  const sentinelLike = fc
    .tuple(fc.constantFrom('=?base64?', '=?BASE64?', '=?Base64?', '=?b?', '=?B?', '=?utf-8?b?', '=?UTF-8?B?', '=?base64? ', '=?'), payload, fc.constantFrom('?=', '?=x', '', ' ?=', '?'))
    .map(([open, body, close]) => `${open}${body}${close}`);
  const rawValue = fc.oneof(
    fc.stringMatching(/^[\x20-\x7E]{0,16}$/),
    fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).map((c) => String.fromCharCode(c)), maxLength: 16 }),
    anyName.map(bytesOf),
    sentinelLike,
    sentinelLike.map(bytesOf),
  );

  fuzz(
    'an accepted Mcp-Name is visible ASCII and reads as the same name to the gateway, a UTF-8 reader and a lenient decoder',
    () =>
      fc.property(rawValue, fc.option(anyName, { nil: undefined }), (raw, other) => {
        const meant = decodeHeaderValue(raw);
        // Against the name the gateway decoded, and against an unrelated one.
        for (const name of [meant, other]) {
          if (name === undefined || !gatewayAccepts(raw, name)) continue;
          expect(raw).toMatch(/^[\x20-\x7E]*$/);
          expect(name).toBe(meant);
          expect(lenientReading(raw)).toBe(name);
        }
      }),
    { numRuns: 3000 },
  );

  fuzz(
    'every name a client can send survives the encoding: plain when visible ASCII (and not opening with =? with a ?= after it), else =?base64?…?=',
    () =>
      fc.property(anyName, (name) => {
        const encodedWordLike = name.startsWith('=?') && name.includes('?=', 2);
        const plain = /^[\x21-\x7E](?:[\x20-\x7E]*[\x21-\x7E])?$/.test(name) && !encodedWordLike;
        const encoded = `=?base64?${b64(name)}?=`;
        expect(decodeHeaderValue(encoded)).toBe(name);
        if (plain) expect(decodeHeaderValue(name)).toBe(name);
        else expect(decodeHeaderValue(name) === undefined || name === '').toBe(true);
      }),
    { numRuns: 2000 },
  );
});

describe('[J50] CGI-style upstreams read the headers the gateway judged', () => {
  /** The headers the gateway reads itself, and names that fold onto them in a CGI environment. */
  const JUDGED = ['mcp-session-id', 'mcp-method', 'mcp-name', 'mcp-protocol-version', 'last-event-id'] as const;
  const cgiKey = (name: string) => `HTTP_${name.toUpperCase().replaceAll('-', '_')}`;
  /** A CGI/WSGI/Rack environment from a header list: repeated names joined with ", " as Node joins them. */
  function cgiEnvironment(flat: readonly string[]): Map<string, string> {
    const env = new Map<string, string>();
    for (let i = 0; i < flat.length; i += 2) {
      const key = cgiKey(flat[i]!);
      const before = env.get(key);
      env.set(key, before === undefined ? flat[i + 1]! : `${before}, ${flat[i + 1]!}`);
    }
    return env;
  }
  /** Any spelling a CGI reader folds onto one of JUDGED: random case, each `-` kept or turned into `_`. */
  const folded = fc
    .tuple(fc.constantFrom(...JUDGED), fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }), fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }))
    .map(([name, upper, underscore]) => [...name].map((ch, i) => (ch === '-' && underscore[i] ? '_' : upper[i] ? ch.toUpperCase() : ch)).join(''));
  const token = fc.stringMatching(/^[A-Za-z0-9/_.-]{1,12}$/);
  const headerSet = fc.array(fc.tuple(folded, token), { minLength: 1, maxLength: 8 });

  let server: Server;
  let port: number;
  let received: IncomingMessage | undefined;
  beforeAll(async () => {
    // The gateway's own server options for header parsing (src/server.ts).
    server = createServer({ joinDuplicateHeaders: false, requireHostHeader: false }, (req, res) => {
      received = req;
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  fuzz(
    'what a CGI-style upstream reads as Mcp-Session-Id, Mcp-Method, Mcp-Name, MCP-Protocol-Version and Last-Event-ID is what Node gave the gateway',
    () =>
      fc.asyncProperty(headerSet, async (pairs) => {
        received = undefined;
        await rawRequest(port, buildRequest({ method: 'POST', target: '/mcp', headers: pairs, body: '{}' }));
        const req = received as IncomingMessage | undefined;
        expect(req).toBeDefined();
        const env = cgiEnvironment(buildUpstreamHeaders(req!.rawHeaders, { hostHeader: 'upstream.test', injected: {} }));
        for (const name of JUDGED) {
          // What the gateway judged: Node's reading of the `-` spelling (src/proxy/http-forwarder.ts, src/policy/mcp-headers.ts).
          expect(env.get(cgiKey(name)), name).toBe(req!.headers[name]);
        }
        // No other spelling reaches the upstream at all.
        for (const key of env.keys()) expect(key).not.toMatch(/[a-z]/);
      }),
    { numRuns: 300, longScale: 0.05 },
  );
});
