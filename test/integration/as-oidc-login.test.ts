/**
 * Third-party login end to end (issue 3 item 5, spec §4.7 and §5.12): the real SDK client →
 * the gateway's own consent page → a real OpenID Connect IdP (oidc-provider, headless login) where
 * the gateway is a confidential client with a static id → the gateway's callback → the gateway's
 * own code and token → tools/call through the gateway to server-everything with
 * `upstream_auth: idp_token`, behind a recording hop that shows what the upstream received: the
 * IdP access token of that user, never the gateway's token; refreshed when it expires; two users
 * never crossed. Then step-up (a wider scope → a new consent → the IdP again), an IdP that answers
 * access_denied, and an IdP that cannot be reached.
 */
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { DEFAULT_ROUTE, headlessUser, startAsGateway, type AsGateway, type HeadlessUserLog } from '../helpers/authorization-server.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { accessTokens, chooseIdpLogin, newIdpClient, onIdpTokens, startGatewayIdp } from '../helpers/gateway-idp.js';
import { connectWithOAuth, connectWithToken, followAuthorization, type HeadlessOAuthOptions, type OAuthConnection } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { RFC7636_CHALLENGE } from '../helpers/oauth-requests.js';
import type { OidcProviderHandle } from '../helpers/oidc-provider.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';
import { sleepUntil } from '../helpers/wait.js';

/** IdP access tokens live this long (seconds): short, so a test can see one expire and be refreshed. */
const IDP_TOKEN_TTL = 3;
const IDP_CLIENT = newIdpClient();
const WRITE_TOOL = 'toggle-simulated-logging';

interface IssuedByIdp {
  grantType: string;
  accountId: string | undefined;
  accessToken: string;
  refreshToken?: string;
  idToken?: string;
}

let everything: UpstreamHandle;
let hop: RecordingHop;
let idp: OidcProviderHandle;
let gateway: AsGateway;
/** A second replica of `gateway`: same public URL, signing key and store, another port. */
let replica: TestGateway;
let origin: string;
let mcpUrl: string;
/** Who the headless IdP login signs in next; `deny` makes the IdP answer access_denied instead. */
const idpUser: { account: string; deny: boolean } = { account: 'alice', deny: false };
const issued: IssuedByIdp[] = [];
const issuing: Promise<void>[] = [];
/** When the IdP's token endpoint last handed out tokens (epoch ms). */
let lastIssuedAt = 0;

beforeAll(async () => {
  everything = await startEverythingServer();
  hop = await startRecordingHop(everything.url);
  // The gateway's callback must be registered at the IdP before the gateway exists: pick its port first.
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  mcpUrl = `${origin}${DEFAULT_ROUTE.path}`;
  idp = await startGatewayIdp(origin, IDP_CLIENT, IDP_TOKEN_TTL);
  // Choose the signed-in account per flow (and deny on demand).
  chooseIdpLogin(idp, () => (idpUser.deny ? { error: 'access_denied', error_description: 'the user said no' } : { accountId: idpUser.account }));
  // Everything the IdP's token endpoint hands out, and to whom.
  onIdpTokens(idp, (ctx) => {
    const body = ctx.body;
    lastIssuedAt = Date.now();
    issuing.push(
      accessTokens(idp).find(body.access_token).then((token) => {
        issued.push({ grantType: String(ctx.oidc.params?.grant_type), accountId: token?.accountId, accessToken: body.access_token, refreshToken: body.refresh_token, idToken: body.id_token });
      }),
    );
  });
  const authorizationServer = {
    enabled: true,
    signing_key: { env: 'SIGNING_KEY' },
    login: { kind: 'oidc', issuer: idp.issuer, client_id: IDP_CLIENT.client_id, client_secret: { env: 'IDP_CLIENT_SECRET' }, scopes: ['openid', 'email', 'offline_access'] },
  };
  const route = {
    ...DEFAULT_ROUTE,
    upstream: hop.url,
    upstream_auth: { kind: 'idp_token' },
    rules: [{ match: { method: 'tools/call', tool: WRITE_TOOL }, require_scopes: ['mcp:write'] }],
  };
  const env = { IDP_CLIENT_SECRET: IDP_CLIENT.client_secret, SIGNING_KEY: JSON.stringify(await generateSigningKey()) };
  gateway = await startAsGateway({
    upstream: hop.url,
    gateway: { listen: { host: '127.0.0.1', port }, public_url: origin },
    authorizationServer,
    env,
    routes: { 'everything.yaml': route },
  });
  replica = await startTestGateway(
    {
      'gateway.yaml': gatewayYaml({ public_url: origin, log_level: 'warn', authorization_server: authorizationServer }),
      'everything.yaml': route,
    },
    env,
    { store: gateway.recording },
  );
});

afterAll(async () => {
  await replica?.stop();
  await gateway?.stop();
  await Promise.all([hop?.close(), idp?.close()]);
  await everything?.close();
});

/** The IdP-issued token set whose access token is `accessToken`. */
async function issuedFor(accessToken: string): Promise<IssuedByIdp | undefined> {
  await Promise.all(issuing);
  return issued.find((t) => t.accessToken === accessToken);
}

/** The bearer token the upstream received with the tools/call that carried `marker`. */
function upstreamBearerFor(marker: string): string {
  const request = hop.requests.find((r) => r.body.toString('utf8').includes(marker));
  if (!request) throw new Error(`the upstream never received ${marker}`);
  const values = request.headers.filter(([name]) => name.toLowerCase() === 'authorization').map(([, value]) => value);
  expect(values).toHaveLength(1);
  expect(values[0]).toMatch(/^Bearer /);
  return (values[0] as string).slice('Bearer '.length);
}

/** Until the IdP access tokens issued so far need a refresh: 0.2 s past the lifetime of the newest, counted from its issue rather than from now. */
const expiry = () => sleepUntil(lastIssuedAt + IDP_TOKEN_TTL * 1000 + 200);

async function refreshCount(): Promise<number> {
  await Promise.all(issuing);
  return issued.filter((t) => t.grantType === 'refresh_token').length;
}

async function echo(conn: OAuthConnection, marker: string): Promise<string> {
  const result = await conn.client.callTool({ name: 'echo', arguments: { message: marker } });
  expect(result.content).toEqual([{ type: 'text', text: `Echo: ${marker}` }]);
  return upstreamBearerFor(marker);
}

async function signIn(account: string, log?: HeadlessUserLog, clientMetadata?: Record<string, unknown>, more: HeadlessOAuthOptions = {}): Promise<OAuthConnection> {
  idpUser.account = account;
  return connectWithOAuth(mcpUrl, { onPage: headlessUser(account, log && { log }), ...(clientMetadata && { clientMetadata }), ...more });
}

describe('login through a third-party OpenID Connect IdP', () => {
  let alice: OAuthConnection;
  let bob: OAuthConnection;

  afterAll(async () => {
    await alice?.close();
    await bob?.close();
  });

  it('asks the gateway consent first, then the IdP; the upstream gets that user’s IdP access token, never the gateway token', async () => {
    const log: HeadlessUserLog = { consentPages: [], loginPages: [] };
    const interactionsBefore = idp.interactions.length;
    alice = await signIn('alice', log);
    // The gateway's consent page named the client; the IdP then logged alice in (no gateway login page).
    expect(log.consentPages).toHaveLength(1);
    expect(log.consentPages[0]).toContain('mcp-auth-gateway test harness');
    expect(log.loginPages).toHaveLength(0);
    expect(idp.interactions.length).toBeGreaterThan(interactionsBefore);
    const idpRequest = idp.interactions.at(-1)!.params;
    expect(idpRequest).toMatchObject({ client_id: IDP_CLIENT.client_id, redirect_uri: `${origin}/authorize/login/oidc/callback`, code_challenge_method: 'S256' });
    expect(idpRequest.nonce).toBeTruthy();

    const tokens = alice.tokens()!;
    const claims = decodeJwt(tokens.access_token);
    // sub is the IdP's sub; the grant id claim ties the token to the IdP tokens kept for this grant.
    expect(claims).toMatchObject({ iss: origin, sub: 'alice', aud: mcpUrl, scope: 'mcp:read' });
    expect(typeof claims.gid).toBe('string');

    const bearer = await echo(alice, 'alice-first');
    const fromIdp = await issuedFor(bearer);
    // Alice's IdP token: the code grant's own, or its refresh when signing in outlasted the 3 s
    // lifetime (a loaded machine); either way issued to alice at her login.
    expect(issued.some((t) => t.grantType === 'authorization_code' && t.accountId === 'alice')).toBe(true);
    expect(fromIdp?.accountId).toBe('alice');
    expect(['authorization_code', 'refresh_token']).toContain(fromIdp?.grantType);
    // F26: none of the IdP's tokens reached the client.
    const clientSide = JSON.stringify(tokens);
    for (const t of issued) for (const secret of [t.accessToken, t.refreshToken, t.idToken]) if (secret) expect(clientSide).not.toContain(secret);
    // The gateway's token never reaches the upstream.
    for (const request of hop.requests) {
      expect(request.headers.map(([, v]) => v).join('\n')).not.toContain(tokens.access_token);
      expect(request.body.toString('utf8')).not.toContain(tokens.access_token);
    }
  });

  it('refreshes the IdP access token with the IdP refresh token once it expires: one refresh for concurrent calls', async () => {
    const before = await echo(alice, 'alice-before-expiry');
    const gatewayToken = alice.tokens()!.access_token;
    await expiry();
    const refreshesBefore = await refreshCount();
    const after = await Promise.all([1, 2, 3, 4, 5].map((i) => echo(alice, `alice-after-expiry-${i}`)));
    expect(new Set(after).size).toBe(1);
    expect(after[0]).not.toBe(before);
    expect(await issuedFor(after[0]!)).toMatchObject({ grantType: 'refresh_token', accountId: 'alice' });
    expect(await refreshCount()).toBe(refreshesBefore + 1);
    // The gateway token did not change: the refresh happened behind it.
    expect(alice.tokens()!.access_token).toBe(gatewayToken);
    expect(await echo(alice, 'alice-reuse')).toBe(after[0]);
  });

  it('two replicas sharing the store refresh an expired IdP token once between them', async () => {
    const onReplica = await connectWithToken(`${replica.url}${DEFAULT_ROUTE.path}`, alice.tokens()!.access_token);
    try {
      await expiry();
      const refreshesBefore = await refreshCount();
      const viaReplica = async (i: number) => {
        const marker = `alice-replica-${i}`;
        await onReplica.callTool({ name: 'echo', arguments: { message: marker } });
        return upstreamBearerFor(marker);
      };
      const bearers = await Promise.all([echo(alice, 'alice-primary-1'), viaReplica(1), echo(alice, 'alice-primary-2'), viaReplica(2)]);
      expect(new Set(bearers).size).toBe(1);
      expect(await refreshCount()).toBe(refreshesBefore + 1);
      expect((await issuedFor(bearers[0]!))?.accountId).toBe('alice');
    } finally {
      await onReplica.close();
    }
  });

  it('keeps two users apart: each gateway token resolves only its own IdP token, even when calls interleave', async () => {
    bob = await signIn('bob');
    expect(decodeJwt(bob.tokens()!.access_token).sub).toBe('bob');
    const calls: Array<[string, OAuthConnection]> = Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? ['alice', alice] : ['bob', bob]));
    const bearers = await Promise.all(calls.map(([who, conn], i) => echo(conn, `${who}-interleaved-${i}`).then((bearer) => [who, bearer] as const)));
    for (const [who, bearer] of bearers) expect((await issuedFor(bearer))?.accountId).toBe(who);
    expect(new Set(bearers.filter(([w]) => w === 'alice').map(([, b]) => b))).not.toEqual(new Set(bearers.filter(([w]) => w === 'bob').map(([, b]) => b)));
  });
});

describe('step-up with the built-in AS and a third-party login', () => {
  it('the client the SDK registered with the first challenge’s scope re-authorizes with the union: a new consent for the added scope, the IdP again, then the call succeeds', async () => {
    const log: HeadlessUserLog = { consentPages: [], loginPages: [] };
    // SDK 1.32 refreshes instead of re-authorizing when it holds a refresh token (which cannot widen
    // the scope), so this client registers without the refresh_token grant.
    const conn = await signIn('carol', log, { grant_types: ['authorization_code'] });
    try {
      // The SDK registered with the scope of the first 401 (mcp:read): that bounds nothing (DESIGN §8.3).
      expect(conn.provider.clientInformation()).toMatchObject({ scope: 'mcp:read' });
      const interactionsBefore = idp.interactions.length;
      await expect(conn.client.callTool({ name: WRITE_TOOL, arguments: {} })).rejects.toThrow(UnauthorizedError);
      const stepUpRequest = conn.provider.authorizationUrls.at(-1)!;
      expect(stepUpRequest.searchParams.get('scope')?.split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);
      await conn.transport.finishAuth(conn.provider.takeAuthorizationCode());
      expect(conn.tokens()!.scope?.split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);
      expect(log.consentPages).toHaveLength(2);
      expect(log.consentPages[1]).toContain('mcp:write');
      expect(idp.interactions.length).toBeGreaterThan(interactionsBefore);
      const toggled = await conn.client.callTool({ name: WRITE_TOOL, arguments: {} });
      expect(toggled.isError).toBeFalsy();
      const claims = decodeJwt(conn.tokens()!.access_token);
      expect(claims).toMatchObject({ sub: 'carol', scope: 'mcp:read mcp:write' });
    } finally {
      await conn.close();
    }
  });
});

/** Registers a public client at `issuer` and plays the browser from /authorize to the client's redirect URI. */
async function authorizeThroughBrowser(issuer: string, state: string): Promise<URL> {
  const redirectUri = `http://127.0.0.1:${await freePort()}/cb`;
  const registered = await fetch(`${issuer}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' }),
  });
  const { client_id } = (await registered.json()) as { client_id: string };
  const authorize = new URL(`${issuer}/authorize`);
  authorize.search = new URLSearchParams({
    response_type: 'code',
    client_id,
    redirect_uri: redirectUri,
    code_challenge: RFC7636_CHALLENGE,
    code_challenge_method: 'S256',
    state,
  }).toString();
  return followAuthorization(authorize, redirectUri, { onPage: headlessUser('nobody') });
}

describe('when the IdP does not sign the user in', () => {
  it('relays access_denied to the client with its state and the gateway iss (in its own words, not the IdP’s)', async () => {
    idpUser.deny = true;
    try {
      const mark = gateway.recording.writes.length;
      const back = await authorizeThroughBrowser(origin, 'st-denied');
      expect(back.searchParams.get('error')).toBe('access_denied');
      expect(back.searchParams.get('state')).toBe('st-denied');
      expect(back.searchParams.get('iss')).toBe(origin);
      expect(back.searchParams.has('code')).toBe(false);
      expect(back.href).not.toContain('said');
      expect(gateway.recording.namespacesSince(mark)).not.toContain('code');
      expect(gateway.recording.namespacesSince(mark)).not.toContain('idp-token');
    } finally {
      idpUser.deny = false;
    }
  });

  it('an unreachable IdP: the client gets temporarily_unavailable after consent, and nothing is issued', async () => {
    const down = await startAsGateway({
      upstream: hop.url,
      authorizationServer: { login: { kind: 'oidc', issuer: `http://127.0.0.1:${await freePort()}`, client_id: 'gw', scopes: ['openid'] } },
      routes: { 'everything.yaml': { ...DEFAULT_ROUTE, upstream_auth: { kind: 'idp_token' } } },
    });
    try {
      const mark = down.recording.writes.length;
      const back = await authorizeThroughBrowser(down.issuer, 'st-down');
      expect(back.searchParams.get('error')).toBe('temporarily_unavailable');
      expect(back.searchParams.get('state')).toBe('st-down');
      expect(back.searchParams.get('iss')).toBe(down.issuer);
      expect(down.recording.namespacesSince(mark)).not.toContain('code');
    } finally {
      await down.stop();
    }
  });
});
