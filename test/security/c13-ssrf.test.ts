/**
 * SECURITY-CASES C13 and D (Client ID Metadata Documents): the SSRF guard's refusal table as a
 * unit, the guard against real servers (numeric host forms, DNS to loopback, redirects re-checked,
 * size and time limits), and CIMD clients through the gateway — including that, without the
 * test-only loopback permission, the gateway never fetches a loopback client_id at all — and the
 * configured fetches (JWKS, introspection) that never follow a redirect.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSafeFetcher, isForbiddenAddress, SafeFetchError } from '../../src/authorization-server/helpers/safe-fetch.js';
import { cacheLifetime } from '../../src/authorization-server/clients/client-id-metadata-document.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { closeServer, freePort, listen } from '../helpers/net.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml, jwtRoute, now, resourceOf, startRecordingUpstream, startTestIssuer, type RecordingUpstream, type TestIssuer } from '../helpers/security-fixtures.js';
import { headlessUser, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { startDocumentServer, type DocumentServer } from '../helpers/https-documents.js';
import { newVerifier, s256 } from '../helpers/oauth-requests.js';

describe('[C13] the refusal table', () => {
  const forbidden = [
    '127.0.0.1', '127.1.2.3', '0.0.0.0', '0.1.2.3', '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255', '192.168.1.1',
    '169.254.169.254', '169.254.0.1', '100.64.0.1', '100.127.255.255', '192.0.0.1', '192.0.2.1', '198.18.0.1', '198.51.100.1', '203.0.113.1',
    '224.0.0.1', '239.255.255.250', '240.0.0.1', '255.255.255.255',
    '::', '::1', '[::1]', '::ffff:127.0.0.1', '::ffff:7f00:1', '[::ffff:7f00:1]', '::ffff:10.0.0.1', '::ffff:169.254.169.254', '::ffff:a9fe:a9fe',
    'fc00::1', 'fd00:ec2::254', 'fe80::1', 'fe80::1%eth0', 'fec0::1', 'ff02::1', '64:ff9b::7f00:1', '2002:7f00:1::1', '2001:db8::1', '100::1',
    'localhost', 'metadata.google.internal', '2130706433', '0x7f000001', '', 'not an address',
    // IPv4 embedded in IPv6 in every other way: compatible (::/96), translated (SIIT), NAT64, 6to4, Teredo.
    '::127.0.0.1', '::7f00:1', '::a9fe:a9fe', '::10.0.0.1', '::ffff:0:7f00:1', '::ffff:0:127.0.0.1', '0:0:0:0:0:ffff:7f00:1',
    '::ffff:0.0.0.0', '::ffff:c0a8:1', '::ffff:192.168.0.1', '::ffff:100.100.100.200', '64:ff9b::a9fe:a9fe', '64:ff9b:1::a9fe:a9fe',
    '2002:a9fe:a9fe::1', '2001::1', '2001:0::a9fe:a9fe',
    // Cloud metadata and other special-purpose addresses by provider.
    '169.254.170.2', '100.100.100.200', '192.0.0.192', '198.19.255.255', '0.255.255.255', '127.255.255.255', '255.255.255.254', 'fd12:3456::1', 'ff05::2',
    // Not plain addresses: a trailing dot, a zone id, a CIDR, a port.
    '127.0.0.1.', '::ffff:127.0.0.1%lo', '10.0.0.0/8', '127.0.0.1:443', '[::1]:443', ' 127.0.0.1', '127.0.0.1 ',
  ];
  it.each(forbidden)('refuses %j', (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });

  const allowed = ['8.8.8.8', '1.1.1.1', '172.32.0.1', '172.15.255.255', '100.128.0.1', '11.0.0.1', '192.169.0.1', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '::ffff:8.8.8.8', '[2606:4700:4700::1111]'];
  it.each(allowed)('allows %s', (address) => {
    expect(isForbiddenAddress(address)).toBe(false);
  });

  it('the test-only permission opens loopback and nothing else', () => {
    for (const a of ['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1']) expect(isForbiddenAddress(a, { allowLoopback: true })).toBe(false);
    for (const a of ['10.0.0.1', '169.254.169.254', '192.168.0.1', 'fc00::1', '0.0.0.0']) expect(isForbiddenAddress(a, { allowLoopback: true })).toBe(true);
  });

  it.each([
    [undefined, 300_000],
    ['no-store', 300_000],
    ['max-age=0', 300_000],
    ['max-age=60', 300_000],
    ['public, max-age=3600', 3_600_000],
    ['max-age=999999', 86_400_000],
  ])('Cache-Control %s → cached %i ms', (header, ms) => {
    expect(cacheLifetime(header)).toBe(ms);
  });
});

let documents: DocumentServer;

beforeAll(async () => {
  documents = await startDocumentServer();
});
afterAll(async () => {
  await documents?.close();
});

const redirectTo = (location: string) => (_req: IncomingMessage, res: ServerResponse) => res.writeHead(302, { location }).end();
const json = (body: unknown, headers: Record<string, string> = {}) => (_req: IncomingMessage, res: ServerResponse) =>
  res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));

async function failure(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(SafeFetchError);
    return (err as SafeFetchError).reason;
  }
  throw new Error('expected a refusal');
}

describe('[C13] the guard against real servers', () => {
  it('refuses loopback in every spelling without the test permission, before connecting', async () => {
    const port = new URL(documents.origin).port;
    const fetcher = createSafeFetcher({ ca: documents.cert });
    try {
      documents.hits.length = 0;
      for (const host of [
        '127.0.0.1', '2130706433', '0x7f.0.0.1', '017700000001', '127.1', '[::1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', 'localhost',
        '0177.0.0.1', '0x7f.1', '127.0.1', '127.000.000.001', '0x7F000001', '127.0.0.1.', 'LOCALHOST', 'localhost.', '[0:0:0:0:0:0:0:1]',
        '[0:0:0:0:0:ffff:127.0.0.1]', '[::127.0.0.1]', '[::ffff:0:7f00:1]', '127.0.0.1%2e', '%31%32%37.0.0.1', '0', '0.0.0.0', '[::]',
      ]) {
        // A name the resolver may not know (`localhost.`) fails as a network error instead: never a connection either way.
        expect(host === 'localhost.' ? ['forbidden_address', 'network'] : ['forbidden_address'], host).toContain(await failure(fetcher.fetch(`https://${host}:${port}/doc`)));
      }
      expect(documents.hits).toEqual([]);
      expect(await failure(fetcher.fetch(`http://example.com/doc`))).toBe('not_https');
      expect(await failure(fetcher.fetch(`https://user:pw@example.com/doc`))).toBe('not_https');
      for (const url of ['HTTP://example.com/doc', 'ftp://example.com/doc', 'file:///etc/passwd', 'gopher://example.com/_', 'data:application/json,{}', 'ws://example.com/', 'https://user@example.com/doc']) {
        expect(await failure(fetcher.fetch(url)), url).toBe('not_https');
      }
    } finally {
      await fetcher.close();
    }
  });

  it('follows at most three redirects, re-checking each hop', async () => {
    const fetcher = createSafeFetcher({ allowLoopback: true, ca: documents.cert });
    documents.routes.set('/final', json({ ok: true }));
    documents.routes.set('/r1', redirectTo('/r2'));
    documents.routes.set('/r2', redirectTo('/r3'));
    documents.routes.set('/r3', redirectTo(`${documents.origin}/final`));
    documents.routes.set('/r0', redirectTo('/r1'));
    documents.routes.set('/to-http', redirectTo(`http://127.0.0.1:${new URL(documents.origin).port}/final`));
    documents.routes.set('/to-private', redirectTo('https://10.0.0.1/doc'));
    documents.routes.set('/to-metadata', redirectTo('https://[::ffff:169.254.169.254]/latest/meta-data/'));
    documents.routes.set('/to-decimal', redirectTo('https://2852039166/latest/'));
    documents.routes.set('/to-compat', redirectTo('https://[::a9fe:a9fe]/latest/'));
    documents.routes.set('/to-nat64', redirectTo('https://[64:ff9b::a9fe:a9fe]/latest/'));
    documents.routes.set('/to-localhost', redirectTo(`https://localhost:${new URL(documents.origin).port}/final`));
    documents.routes.set('/to-file', redirectTo('file:///etc/passwd'));
    documents.routes.set('/to-userinfo', redirectTo(`https://user:pw@127.0.0.1:${new URL(documents.origin).port}/final`));
    documents.routes.set('/to-scheme-relative', redirectTo('//10.0.0.1/doc'));
    try {
      const ok = await fetcher.fetch(`${documents.origin}/r1`);
      expect(ok.status).toBe(200);
      expect(ok.url).toBe(`${documents.origin}/final`);
      expect(await failure(fetcher.fetch(`${documents.origin}/r0`))).toBe('too_many_redirects');
      expect(await failure(fetcher.fetch(`${documents.origin}/to-http`))).toBe('not_https');
      expect(await failure(fetcher.fetch(`${documents.origin}/to-private`))).toBe('forbidden_address');
      expect(await failure(fetcher.fetch(`${documents.origin}/to-metadata`))).toBe('forbidden_address');
      expect(await failure(fetcher.fetch(`${documents.origin}/to-decimal`))).toBe('forbidden_address');
      expect(await failure(fetcher.fetch(`${documents.origin}/to-compat`))).toBe('forbidden_address');
      expect(await failure(fetcher.fetch(`${documents.origin}/to-nat64`))).toBe('forbidden_address');
      expect(await failure(fetcher.fetch(`${documents.origin}/to-file`))).toBe('not_https');
      expect(await failure(fetcher.fetch(`${documents.origin}/to-userinfo`))).toBe('not_https');
      expect(await failure(fetcher.fetch(`${documents.origin}/to-scheme-relative`))).toBe('forbidden_address');
    } finally {
      await fetcher.close();
    }
  });

  it('bounds size (declared or streamed) and time', async () => {
    const fetcher = createSafeFetcher({ allowLoopback: true, ca: documents.cert, timeoutMs: 500 });
    documents.routes.set('/big-declared', (_req, res) => res.writeHead(200, { 'content-length': String(100_000) }).end('x'.repeat(100_000)));
    documents.routes.set('/big-chunked', (_req, res) => {
      res.writeHead(200);
      for (let i = 0; i < 10; i++) res.write('x'.repeat(10_000));
      res.end();
    });
    documents.routes.set('/slow', (_req, res) => {
      res.writeHead(200);
      res.write('{');
      setTimeout(() => res.end('}'), 3_000).unref();
    });
    try {
      expect(await failure(fetcher.fetch(`${documents.origin}/big-declared`))).toBe('too_large');
      expect(await failure(fetcher.fetch(`${documents.origin}/big-chunked`))).toBe('too_large');
      const started = Date.now();
      expect(await failure(fetcher.fetch(`${documents.origin}/slow`))).toBe('timeout');
      expect(Date.now() - started).toBeLessThan(2_000);
    } finally {
      await fetcher.close();
    }
  });
});

describe('[C13] [D14] Client ID Metadata Documents through the gateway', () => {
  let gateway: AsGateway;
  let guarded: AsGateway;
  let redirectUri: string;
  const verifier = newVerifier();
  const challenge = s256(verifier);

  beforeAll(async () => {
    gateway = await startAsGateway({ upstream: 'http://127.0.0.1:9/mcp', options: { safeFetch: { allowLoopback: true, ca: documents.cert } } });
    guarded = await startAsGateway({ upstream: 'http://127.0.0.1:9/mcp' });
    redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
  });
  afterAll(async () => {
    await Promise.all([gateway?.stop(), guarded?.stop()]);
  });

  function publish(path: string, doc: (url: string) => Record<string, unknown>, headers?: Record<string, string>): string {
    const url = `${documents.origin}${path}`;
    documents.routes.set(path, json(doc(url), headers));
    return url;
  }

  const authorize = (gw: AsGateway, clientId: string, over: Record<string, string> = {}) => {
    const url = new URL(`${gw.issuer}/authorize`);
    url.search = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: redirectUri, code_challenge: challenge, code_challenge_method: 'S256', state: 'c', ...over }).toString();
    return url;
  };

  it('a valid document: consent names the publisher, the flow completes, the token names the URL as client_id, the document is cached', async () => {
    const clientId = publish('/good/client.json', (url) => ({ client_id: url, client_name: 'Doc Client', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' }), {
      'cache-control': 'max-age=1',
    });
    documents.hits.length = 0;
    const page = await fetch(authorize(gateway, clientId), { redirect: 'manual' });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('Doc Client');
    expect(html).toContain(`published by 127.0.0.1:${new URL(documents.origin).port}`);

    const callback = await followAuthorization(authorize(gateway, clientId), redirectUri, { onPage: headlessUser('judy') });
    const res = await fetch(`${gateway.issuer}/token`, {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'authorization_code', code: callback.searchParams.get('code')!, code_verifier: verifier, redirect_uri: redirectUri, client_id: clientId }),
    });
    expect(res.status).toBe(200);
    const { access_token } = (await res.json()) as { access_token: string };
    expect(decodeJwt(access_token)).toMatchObject({ client_id: clientId, sub: 'judy' });
    // max-age=1 is held to the 5-minute minimum: fetched once for all of the above.
    expect(documents.hits.filter((h) => h === '/good/client.json')).toHaveLength(1);
  });

  it.each([
    ['names another client_id', (url: string) => ({ client_id: `${url}?x`, redirect_uris: [redirectUri] })],
    ['holds a client_secret', (url: string) => ({ client_id: url, client_secret: 's', redirect_uris: [redirectUri] })],
    ['wants client_secret_basic', (url: string) => ({ client_id: url, token_endpoint_auth_method: 'client_secret_basic', redirect_uris: [redirectUri] })],
    ['lists a javascript: redirect URI', (url: string) => ({ client_id: url, redirect_uris: ['javascript:alert(1)'] })],
    ['does not list the redirect_uri', (url: string) => ({ client_id: url, redirect_uris: ['https://elsewhere.example/cb'] })],
  ])('a document that %s → an error page, no redirect', async (name, doc) => {
    const clientId = publish(`/bad/${encodeURIComponent(name)}.json`, doc);
    const mark = gateway.recording.writes.length;
    const res = await fetch(authorize(gateway, clientId), { redirect: 'manual' });
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    expect(gateway.recording.writes.slice(mark)).toEqual([]);
  });

  it('a missing document, a non-JSON one, or a redirect to a private address → an error page', async () => {
    documents.routes.set('/not-json.json', (_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>'));
    documents.routes.set('/bounce.json', redirectTo('https://192.168.0.1/client.json'));
    for (const path of ['/missing.json', '/not-json.json', '/bounce.json']) {
      const res = await fetch(authorize(gateway, `${documents.origin}${path}`), { redirect: 'manual' });
      expect(res.status, path).toBe(400);
    }
  });

  it('without the test-only permission the gateway never fetches a loopback client_id', async () => {
    const clientId = publish('/guarded/client.json', (url) => ({ client_id: url, redirect_uris: [redirectUri] }));
    documents.hits.length = 0;
    for (const id of [clientId, clientId.replace('127.0.0.1', 'localhost'), clientId.replace('127.0.0.1', '2130706433')]) {
      const res = await fetch(authorize(guarded, id), { redirect: 'manual' });
      expect(res.status, id).toBe(400);
      expect(await res.text()).toContain('forbidden_address');
    }
    expect(documents.hits).toEqual([]);
  });
});

describe('[C13] configured fetches (JWKS, issuer metadata, introspection) do not follow redirects', () => {
  let issuer: TestIssuer;
  let upstream: RecordingUpstream;
  let redirector: Server;
  let redirectorOrigin: string;
  let introspectionHits = 0;
  let introspector: Server;
  let gw: TestGateway;

  beforeAll(async () => {
    [issuer, upstream] = await Promise.all([startTestIssuer(), startRecordingUpstream()]);
    introspector = createServer((_req, res) => {
      introspectionHits++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ active: true, sub: 'x', aud: resourceOf('/intro/mcp'), exp: now() + 300 }));
    });
    const introPort = await listen(introspector);
    redirector = createServer((req, res) => {
      const to: Record<string, string> = {
        '/jwks.json': issuer.jwksUri,
        '/.well-known/oauth-authorization-server': `${issuer.issuer}/.well-known/oauth-authorization-server`,
        '/introspect': `http://127.0.0.1:${introPort}/introspect`,
      };
      res.writeHead(req.url === '/introspect' ? 307 : 302, { location: to[req.url ?? ''] ?? '/' }).end();
    });
    redirectorOrigin = `http://127.0.0.1:${await listen(redirector)}`;
    gw = await startTestGateway(
      {
        'gateway.yaml': gatewayYaml(),
        'jwks.yaml': jwtRoute('/jwks/mcp', `${upstream.origin}/mcp`, { ...issuer, jwksUri: `${redirectorOrigin}/jwks.json` }),
        'intro.yaml': {
          path: '/intro/mcp',
          upstream: `${upstream.origin}/mcp`,
          authorization_servers: [issuer.issuer],
          token: { introspection: { endpoint: `${redirectorOrigin}/introspect`, client_id: 'gw', client_secret: { env: 'INTRO_SECRET' } } },
        },
      },
      { INTRO_SECRET: 'intro-secret-0123456789' },
    );
  });
  afterAll(async () => {
    await gw?.stop();
    await Promise.all([issuer?.close(), upstream?.close(), closeServer(redirector), closeServer(introspector)]);
  });

  const call = (path: string, token: string) =>
    fetch(`${gw.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' });

  it('a jwks_uri that redirects: the token is refused and the redirect target is never fetched', async () => {
    const res = await call('/jwks/mcp', await issuer.mint({ aud: resourceOf('/jwks/mcp') }));
    expect([401, 503]).toContain(res.status);
    expect(issuer.jwksFetches).toBe(0);
    expect(upstream.requests).toHaveLength(0);
  });

  it('an introspection endpoint that redirects: 503, the redirect target is never called', async () => {
    const res = await call('/intro/mcp', 'opaque-token-0123456789');
    expect(res.status).toBe(503);
    expect(introspectionHits).toBe(0);
    expect(upstream.requests).toHaveLength(0);
  });
});
