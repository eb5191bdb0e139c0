import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { buildUpstreamHeaders, filterResponseHeaders } from '../../src/proxy/headers.js';

const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'];
const NEVER_FORWARDED = [...HOP_BY_HOP, 'authorization', 'proxy-authorization', 'cookie'];

/** `[name, value, …]` → lower-case name → values. */
function byName(flat: readonly string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!.toLowerCase();
    out.set(name, [...(out.get(name) ?? []), flat[i + 1]!]);
  }
  return out;
}

const opts = { hostHeader: 'upstream.internal:3000', injected: { authorization: 'Bearer upstream-credential' } };

describe('buildUpstreamHeaders', () => {
  it('keeps end-to-end headers in order, duplicates included', () => {
    const out = buildUpstreamHeaders(
      ['Accept', 'application/json, text/event-stream', 'Mcp-Session-Id', 's1', 'Last-Event-ID', '7', 'Accept', 'x/y', 'Content-Type', 'application/json'],
      opts,
    );
    expect(out).toEqual([
      'host', 'upstream.internal:3000',
      'accept', 'application/json, text/event-stream',
      'mcp-session-id', 's1',
      'last-event-id', '7',
      'accept', 'x/y',
      'content-type', 'application/json',
      'authorization', 'Bearer upstream-credential',
    ]);
  });

  it("drops the client's credentials, identity and hop-by-hop headers and sets Host", () => {
    const out = byName(
      buildUpstreamHeaders(
        [
          'Host', 'gateway.example',
          'Authorization', 'Bearer client-token',
          'authorization', 'Bearer second',
          'Proxy-Authorization', 'Basic eDp5',
          'Cookie', 'mag_session=abc',
          'Content-Length', '12',
          'Transfer-Encoding', 'chunked',
          'Expect', '100-continue',
          'X-Forwarded-User', 'admin',
          'x-FORWARDED-for', '1.2.3.4',
          'X-Forwarded-Proto', 'https',
          'Forwarded', 'for=1.2.3.4',
          'X-Real-IP', '1.2.3.4',
          'X-Auth-Request-Email', 'admin@example.com',
          'X-Authenticated-User', 'admin',
          'X-Remote-User', 'admin',
          'Remote-User', 'admin',
          'X-User', 'admin',
          'X-User-Id', '1',
          'X-Email', 'a@b',
          'X-Original-URL', '/admin',
          'X-HTTP-Method-Override', 'DELETE',
          'Proxy-Foo', 'x',
          'Keep-Alive', 'timeout=5',
          'TE', 'trailers',
          'Upgrade', 'websocket',
          'Trailer', 'x',
          'Proxy-Connection', 'keep-alive',
          'Accept', 'application/json',
        ],
        opts,
      ),
    );
    expect([...out.keys()].sort()).toEqual(['accept', 'authorization', 'host']);
    expect(out.get('host')).toEqual(['upstream.internal:3000']);
    expect(out.get('authorization')).toEqual(['Bearer upstream-credential']);
  });

  it('[H35] drops DPoP, RFC 9440 certificates and the identity-aware proxies\' headers; keeps look-alikes and X-Api-Key', () => {
    const identity = [
      'DPoP', 'Client-Cert', 'Client-Cert-Chain', 'X-MS-Client-Principal', 'X-MS-Client-Principal-Name', 'X-MS-TOKEN-AAD-ID-TOKEN',
      'Cf-Access-Jwt-Assertion', 'CF-Access-Authenticated-User-Email', 'X-Amzn-Oidc-Data', 'X-Goog-Authenticated-User-Email', 'X-Goog-IAP-JWT-Assertion',
      'X-Pomerium-Claim-Email', 'X-WEBAUTH-USER', 'X-SSL-Client-S-DN', 'SSL-Client-Cert', 'X-Client-Cert', 'X-Client-Certificate', 'X-Consumer-Username',
      'X-Userinfo', 'X-Access-Token', 'X-Id-Token', 'Gap-Auth', 'X-Auth-Request-Groups', 'Remote-Groups', 'X-Remote-Addr', 'X-authentik-jwt',
      'X-Vouch-User', 'X-Endpoint-API-UserInfo', 'X-Apigateway-Api-Userinfo',
    ];
    const kept = ['X-Api-Key', 'Dpop-Nonce-Hint', 'X-Cert', 'X-Ms-Request-Id', 'Cf-Ray', 'X-Amzn-Trace-Id', 'X-Goog-Api-Client', 'X-Userinfo-Hint', 'Mcp-Name', 'Mcp-Method', 'Mcp-Param-Region', 'MCP-PARAM-X-Tenant-Id'];
    const out = byName(buildUpstreamHeaders([...identity, ...kept].flatMap((name) => [name, 'v']), opts));
    expect([...out.keys()].sort()).toEqual(['authorization', 'host', ...kept.map((n) => n.toLowerCase())].sort());
  });

  it('[J50] drops every name a CGI, WSGI or Rack upstream would fold onto another: only letters, digits and `-` pass', () => {
    const folded = [
      'Mcp_Session_Id', 'mcp_session-id', 'MCP_SESSION_ID', 'Mcp_Method', 'Mcp_Name', 'mcp_protocol_version', 'Last_Event_ID',
      'X_Forwarded_User', 'x_api_key', 'Authorization_', '_authorization', 'Content_Type', 'Host_', 'x.forwarded.user', 'x~user', "x'user",
    ];
    const out = buildUpstreamHeaders([...folded.flatMap((name) => [name, 'attacker']), 'Mcp-Session-Id', 's1', 'X-Custom-9', 'v'], opts);
    expect(out).toEqual(['host', 'upstream.internal:3000', 'mcp-session-id', 's1', 'x-custom-9', 'v', 'authorization', 'Bearer upstream-credential']);
  });

  it('drops what Connection names, but never the injected credential', () => {
    const out = byName(
      buildUpstreamHeaders(
        ['Connection', 'x-custom, Authorization', 'connection', ' X-Other ,,', 'X-Custom', 'secret', 'x-other', '1', 'x-kept', 'yes'],
        { hostHeader: 'u:1', injected: { authorization: 'Bearer up', 'x-api-key': 'k' } },
      ),
    );
    expect(out.has('x-custom')).toBe(false);
    expect(out.has('x-other')).toBe(false);
    expect(out.has('connection')).toBe(false);
    expect(out.get('x-kept')).toEqual(['yes']);
    expect(out.get('authorization')).toEqual(['Bearer up']);
    expect(out.get('x-api-key')).toEqual(['k']);
  });

  it('a client header with the name of an injected one is replaced, not duplicated', () => {
    const out = byName(buildUpstreamHeaders(['X-Api-Key', 'client-guess', 'x-api-key', 'again'], { hostHeader: 'u:1', injected: { 'x-api-key': 'real' } }));
    expect(out.get('x-api-key')).toEqual(['real']);
  });

  it('property: nothing hop-by-hop or credential-like survives; injected headers always do', () => {
    const name = fc.oneof(
      fc.constantFrom(...NEVER_FORWARDED, 'x-forwarded-user', 'x-api-key', 'x-custom', 'accept', 'mcp-session-id', 'host', 'content-length', 'constructor', '__proto__'),
      fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/),
    );
    const anyCase = name.chain((n) =>
      fc.array(fc.boolean(), { minLength: n.length, maxLength: n.length }).map((upper) =>
        [...n].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join(''),
      ),
    );
    const header = fc.tuple(anyCase, fc.string({ maxLength: 12 }));
    const connection = fc.array(name, { maxLength: 4 }).map((names) => ['Connection', names.join(', ')] as [string, string]);
    const injected = fc.dictionary(fc.constantFrom('authorization', 'x-api-key', 'x-custom'), fc.stringMatching(/^[A-Za-z0-9 ]{1,10}$/), { minKeys: 1 });
    fc.assert(
      fc.property(fc.array(fc.oneof(header, connection), { maxLength: 16 }), injected, (pairs, inj) => {
        const out = buildUpstreamHeaders(pairs.flat(), { hostHeader: 'u:1', injected: inj });
        const names = byName(out);
        for (const forbidden of NEVER_FORWARDED) {
          if (!(forbidden in inj)) expect(names.has(forbidden)).toBe(false);
        }
        expect([...names.keys()].some((n) => n.startsWith('x-forwarded-') || n.startsWith('proxy-'))).toBe(false);
        for (const [n, v] of Object.entries(inj)) expect(names.get(n)).toEqual([v]);
        expect(names.get('host')).toEqual(['u:1']);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('buildUpstreamHeaders with tracing on', () => {
  const trace = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'gw=1' };

  it("replaces the client's traceparent and tracestate by the gateway's, whatever their case or number", () => {
    const out = byName(
      buildUpstreamHeaders(
        ['TraceParent', '00-11111111111111111111111111111111-2222222222222222-01', 'tracestate', 'client=x', 'Tracestate', 'more=y', 'Accept', 'application/json'],
        { ...opts, trace },
      ),
    );
    expect(out.get('traceparent')).toEqual([trace.traceparent]);
    expect(out.get('tracestate')).toEqual(['gw=1']);
    expect(out.get('accept')).toEqual(['application/json']);
  });

  it("without a tracestate of its own, the client's is dropped too (it belonged to another parent)", () => {
    const out = byName(buildUpstreamHeaders(['tracestate', 'client=x', 'traceparent', 'bogus'], { ...opts, trace: { traceparent: trace.traceparent } }));
    expect(out.get('traceparent')).toEqual([trace.traceparent]);
    expect(out.has('tracestate')).toBe(false);
  });

  it("tracing off: the client's trace context passes as sent", () => {
    const out = byName(buildUpstreamHeaders(['traceparent', 'client-value', 'tracestate', 'client=x'], opts));
    expect(out.get('traceparent')).toEqual(['client-value']);
    expect(out.get('tracestate')).toEqual(['client=x']);
  });

  it('property: with tracing on, exactly the gateway\'s trace context reaches the upstream, and the credential still does', () => {
    const anyCase = (name: string) => fc.array(fc.boolean(), { minLength: name.length, maxLength: name.length }).map((upper) => [...name].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join(''));
    const header = fc.tuple(fc.constantFrom('traceparent', 'tracestate', 'accept', 'connection').chain(anyCase), fc.stringMatching(/^[ -~]{0,20}$/));
    fc.assert(
      fc.property(fc.array(header, { maxLength: 10 }), fc.boolean(), (pairs, withState) => {
        const own = withState ? trace : { traceparent: trace.traceparent };
        const out = byName(buildUpstreamHeaders(pairs.flat(), { ...opts, trace: own }));
        expect(out.get('traceparent')).toEqual([own.traceparent]);
        expect(out.get('tracestate')).toEqual(withState ? ['gw=1'] : undefined);
        expect(out.get('authorization')).toEqual(['Bearer upstream-credential']);
      }),
    );
  });
});

describe('filterResponseHeaders', () => {
  it('drops hop-by-hop, what Connection names, challenges, cookies and CORS; keeps the rest', () => {
    const out = filterResponseHeaders({
      'content-type': 'text/event-stream',
      'mcp-session-id': 's1',
      'content-length': '10',
      connection: 'keep-alive, x-internal',
      'keep-alive': 'timeout=5',
      'transfer-encoding': 'chunked',
      'proxy-authenticate': 'Basic',
      'www-authenticate': 'Bearer resource_metadata="https://upstream-as/"',
      'set-cookie': ['a=1', 'b=2'],
      'x-internal': 'secret',
      'access-control-allow-origin': '*',
      'x-kept': ['1', '2'],
      'x-undefined': undefined,
    });
    expect({ ...out }).toEqual({
      'content-type': 'text/event-stream',
      'mcp-session-id': 's1',
      'content-length': '10',
      'x-kept': ['1', '2'],
    });
  });

  it('keeps __proto__ and constructor as own headers, never as the prototype', () => {
    // An upstream's header named __proto__ with several values: assigned, it would make an array the prototype.
    const out = filterResponseHeaders(JSON.parse('{"__proto__": ["0", "1"], "constructor": "c", "x-a": "1"}') as Record<string, string | string[]>);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(['__proto__', 'constructor', 'x-a']);
    expect(Object.getOwnPropertyDescriptor(out, '__proto__')?.value).toEqual(['0', '1']);
  });

  it('property: no hop-by-hop header survives', () => {
    const name = fc.constantFrom(...HOP_BY_HOP, 'x-a', 'x-b', 'content-type', 'www-authenticate');
    fc.assert(
      fc.property(fc.dictionary(name, fc.string({ maxLength: 5 })), fc.array(name, { maxLength: 3 }), (headers, named) => {
        const out = filterResponseHeaders({ ...headers, connection: named.join(',') });
        for (const n of [...HOP_BY_HOP, ...named, 'www-authenticate']) expect(n in out).toBe(false);
      }),
    );
  });
});
