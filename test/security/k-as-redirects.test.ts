/**
 * [K74] (issue 20 item 12, issue 24 item 5) Native redirect URIs: a private-use scheme is a
 * domain name in reverse order (RFC 8252 §7.1) and carries no web address, so no browser scheme
 * (`microsoft-edge:http://attacker.example/cb`, and the class: googlechrome:, firefox:, opera:,
 * x-safari-https:, …) passes dynamic registration or a Client ID Metadata Document; a stated
 * `application_type` narrows the URIs (web: https only; native: loopback http or a private-use
 * scheme); the consent page names what the redirect opens; the AS metadata advertises CIMD (and,
 * with enterprise IdPs, the ID-JAG profile in `authorization_grant_profiles_supported`).
 * A corpus of browser schemes beside a fast-check property over generated schemes and remainders.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkRedirectUri } from '../../src/config/redirect-uri.js';
import { redirectTarget } from '../../src/authorization-server/pages/display.js';
import { decodeEntities, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { startDocumentServer, type DocumentServer } from '../helpers/https-documents.js';
import { authorizeUrl, getManual, newVerifier, s256 } from '../helpers/oauth-requests.js';

/** Schemes browsers (or the OS for them) register to open a web address, each with the address it would open. */
const BROWSER_REDIRECTS = [
  'microsoft-edge:http://attacker.example/cb',
  'microsoft-edge:https://attacker.example/cb',
  'microsoft-edge-holographic:https://attacker.example/cb',
  'googlechrome://attacker.example/cb',
  'googlechromes://attacker.example/cb',
  'firefox:https://attacker.example/cb',
  'firefox-private:https://attacker.example/cb',
  'opera:https://attacker.example/cb',
  'opera-http://attacker.example/cb',
  'brave://attacker.example/cb',
  'x-safari-https://attacker.example/cb',
  'x-web-search://?attacker.example',
  'search-ms:query=attacker.example',
  'duckduckgo://attacker.example/cb',
  'myapp:/cb',
  // Reverse-DNS schemes that still carry a web address for whatever handles them.
  'com.example.app:http://attacker.example/cb',
  'com.example.app:/open?u=https://attacker.example/cb',
  'com.example.app:/open?u=https%3A%2F%2Fattacker.example%2Fcb',
  'com.example.app://wss:attacker.example/cb',
];
const NATIVE_REDIRECTS = ['com.example.app:/oauth2redirect', 'com.example.app:/cb?x=1', 'io.github.some-user.tool:/callback', 'org.example:/cb'];

let documents: DocumentServer;
let gateway: AsGateway;

beforeAll(async () => {
  documents = await startDocumentServer();
  gateway = await startAsGateway({
    upstream: 'http://127.0.0.1:9/mcp',
    options: { registrationRateLimit: { max: 10_000, windowMs: 60_000 }, safeFetch: { allowLoopback: true, ca: documents.cert } },
  });
});
afterAll(async () => {
  await gateway?.stop();
  await documents?.close();
});

async function register(metadata: Record<string, unknown>) {
  const res = await fetch(`${gateway.issuer}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'k74', token_endpoint_auth_method: 'none', grant_types: ['authorization_code'], ...metadata }),
  });
  return { status: res.status, json: (await res.json()) as Record<string, string> };
}

const authorize = (clientId: string, redirectUri: string) =>
  getManual(authorizeUrl(gateway.issuer, { response_type: 'code', client_id: clientId, redirect_uri: redirectUri, code_challenge: s256(newVerifier()), code_challenge_method: 'S256', state: 's', resource: `${gateway.issuer}/everything/mcp` }));

describe('[K74] schemes that open web addresses are refused', () => {
  it.each(BROWSER_REDIRECTS)('[K74] dynamic registration of a native app with %s → 400 invalid_redirect_uri', async (uri) => {
    const res = await register({ application_type: 'native', redirect_uris: [uri] });
    expect(res.status, JSON.stringify(res.json)).toBe(400);
    expect(res.json.error).toBe('invalid_redirect_uri');
  });

  it.each(BROWSER_REDIRECTS.slice(0, 4))('[K74] a Client ID Metadata Document naming %s: /authorize shows an error page, never a consent page', async (uri) => {
    const path = `/k74/${encodeURIComponent(uri).replace(/%/g, '')}.json`;
    const clientId = `${documents.origin}${path}`;
    documents.routes.set(path, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ client_id: clientId, client_name: 'Doc', application_type: 'native', redirect_uris: [uri] })));
    const res = await authorize(clientId, uri);
    expect(res.status).toBe(400);
    expect(res.body).not.toContain('name="decision"');
    expect(res.headers.get('location')).toBeNull();
  });

  it('[K74] property: a private-use scheme passes only as a reverse-DNS name with no web address after it; anything else is refused', () => {
    const label = fc.stringMatching(/^[a-z][a-z0-9]{0,6}(-[a-z0-9]{1,4})?$/);
    const scheme = fc.oneof(
      fc.array(label, { minLength: 2, maxLength: 4 }).map((labels) => ({ scheme: labels.join('.'), reverseDns: true })),
      label.map((single) => ({ scheme: single, reverseDns: false })),
      fc.constantFrom('microsoft-edge', 'googlechrome', 'firefox', 'x-safari-https', 'com..app', '.com.app', 'com.app.', 'com.-app', 'com+app.x').map((s) => ({ scheme: s, reverseDns: false })),
    );
    const rest = fc.oneof(
      fc.constantFrom('/cb', '/oauth2redirect', '/a/b?x=1').map((r) => ({ rest: r, web: false })),
      fc.constantFrom('http://attacker.example/cb', 'https://attacker.example', '/x?u=https://a.example', '/x?u=HTTPS%3a%2f%2fa.example', '//ftp:a.example').map((r) => ({ rest: r, web: true })),
    );
    fc.assert(
      fc.property(scheme, rest, ({ scheme: s, reverseDns }, { rest: r, web }) => {
        const uri = `${s}:${r}`;
        const verdict = checkRedirectUri(uri, { nativeSchemes: true, only: 'native' });
        expect(verdict.ok, `${uri}: ${verdict.ok ? 'accepted' : verdict.reason}`).toBe(reverseDns && !web);
        // Without application_type native, no private-use scheme at all.
        expect(checkRedirectUri(uri, { nativeSchemes: false }).ok).toBe(false);
      }),
      { numRuns: 500 },
    );
  });
});

describe('[K74] application_type decides what a registration may name (issue 24 item 5)', () => {
  it.each([
    ['web', 'https://app.example/cb', 201],
    ['web', 'http://127.0.0.1:8123/cb', 400],
    ['web', 'http://localhost:8123/cb', 400],
    ['web', 'com.example.app:/cb', 400],
    ['native', 'http://127.0.0.1:8123/cb', 201],
    ['native', 'http://[::1]:8123/cb', 201],
    ['native', 'http://localhost:8123/cb', 201],
    ['native', 'com.example.app:/cb', 201],
    ['native', 'https://app.example/cb', 400],
    ['native', 'http://app.example/cb', 400],
    [undefined, 'https://app.example/cb', 201],
    [undefined, 'http://127.0.0.1:8123/cb', 201],
    [undefined, 'com.example.app:/cb', 400],
  ] as const)('[K74] application_type %s with %s → %i', async (applicationType, uri, status) => {
    const res = await register({ ...(applicationType && { application_type: applicationType }), redirect_uris: [uri] });
    expect(res.status, JSON.stringify(res.json)).toBe(status);
    if (status === 400) expect(res.json.error).toBe('invalid_redirect_uri');
    else expect(res.json.application_type ?? 'web').toBe(applicationType ?? 'web');
  });

  it('[K74] the metadata advertises Client ID Metadata Documents (the way 2026-07-28 clients prefer) beside dynamic registration', async () => {
    const metadata = (await (await fetch(`${gateway.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(metadata.client_id_metadata_document_supported).toBe(true);
    expect(metadata.registration_endpoint).toBe(`${gateway.issuer}/register`);
  });
});

describe('[K74] the consent page shows what the redirect opens', () => {
  it.each(NATIVE_REDIRECTS)('[K74] a native app registered with %s: the page names that URI as what opens, not just "an app"', async (uri) => {
    const registered = await register({ application_type: 'native', redirect_uris: [uri] });
    expect(registered.status, JSON.stringify(registered.json)).toBe(201);
    const page = await authorize(registered.json.client_id!, uri);
    expect(page.status).toBe(200);
    const shown = /Sends you back to<\/dt>\s*<dd>\s*<strong>([^<]*)<\/strong>/.exec(page.body)?.[1];
    expect(decodeEntities(shown ?? '')).toBe(`the app that opens ${uri} on this device`);
  });

  it('[K74] what each kind of redirect is called: a site by its host, loopback as a program on this device, a scheme by its whole URI', () => {
    expect(redirectTarget('https://app.example:8443/cb')).toBe('app.example:8443');
    expect(redirectTarget('http://127.0.0.1:5000/cb')).toBe('a program on this device (127.0.0.1:5000)');
    expect(redirectTarget('com.example.app://host.example/cb')).toBe('the app that opens com.example.app://host.example/cb on this device');
  });
});
