/**
 * The oidc login's IdP quirks (issue 16 item 4) against the real oidc-provider configured as Entra ID
 * behaves (Entra itself is a cloud IdP and cannot run here): it REFUSES an RFC 8707 `resource`
 * (`invalid_target`, as Entra's AADSTS9010010) and names the user in `oid` beside its own `sub`.
 * Two gateways share it: one left at the defaults (send_resource true, subject_claim sub) cannot
 * sign anyone in and says why on an error page; one with `send_resource: false`,
 * `subject_claim: oid` and `extra_authorize_params` signs users in with the oid as the token's
 * `sub`, sends no `resource` anywhere and the extra parameters to the IdP; a missing or non-string
 * oid leaves an error page and no code. Back-channel logout still finds the grant: logout tokens
 * name the IdP's `sub`, which the grant's IdP session is indexed by.
 */
import { decodeJwt, importJWK, SignJWT } from 'jose';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { DEFAULT_ROUTE, recordingAudit, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { chooseIdpLogin, IDP_BACKCHANNEL_LOGOUT_PATH, IDP_CALLBACK_PATH, newIdpClient, onIdpTokens, startGatewayIdp } from '../helpers/gateway-idp.js';
import { redeemCode, walkSignIn, type WalkedSignIn } from '../helpers/idp-sign-in.js';
import { freePort } from '../helpers/net.js';
import { registerPublicClient } from '../helpers/oauth-requests.js';
import type { OidcProviderHandle } from '../helpers/oidc-provider.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';

const IDP_CLIENT = newIdpClient();
const BACKCHANNEL_EVENT = 'http://schemas.openid.net/event/backchannel-logout';
/** Each account's claims beside `sub`: Entra's object id where there is one. */
const ACCOUNTS: Record<string, Record<string, unknown>> = {
  alice: { oid: '6f1c2a3b-0d4e-4f5a-9b8c-7d6e5f4a3b2c', name: 'Alice' },
  'no-oid': { name: 'Nobody' },
  'number-oid': { oid: 42, name: 'Numbered' },
  'object-oid': { oid: { id: 'x' }, name: 'Nested' },
};

let everything: UpstreamHandle;
let idp: OidcProviderHandle;
/** Defaults: send_resource true, subject_claim sub. */
let plain: Gateway;
/** send_resource false, subject_claim oid, extra_authorize_params. */
let entra: Gateway;
let account = 'alice';
/** The parameters of every token request the IdP answered. */
const tokenParams: Record<string, unknown>[] = [];
const audit = recordingAudit();

/** A gateway and its public URL (listen port chosen before it starts: the IdP must know its callback). */
interface Gateway {
  gw: AsGateway;
  origin: string;
}

const resourceOf = (g: Gateway) => `${g.origin}${DEFAULT_ROUTE.path}`;

async function startGateway(port: number, login: Record<string, unknown>): Promise<Gateway> {
  const origin = `http://127.0.0.1:${port}`;
  const gw = await startAsGateway({
    upstream: everything.url,
    gateway: { listen: { host: '127.0.0.1', port }, public_url: origin },
    authorizationServer: {
      signing_key: { env: 'SIGNING_KEY' },
      login: { kind: 'oidc', issuer: idp.issuer, client_id: IDP_CLIENT.client_id, client_secret: { env: 'IDP_CLIENT_SECRET' }, scopes: ['openid', 'profile', 'offline_access'], ...login },
    },
    env: { IDP_CLIENT_SECRET: IDP_CLIENT.client_secret, SIGNING_KEY: JSON.stringify(await generateSigningKey()) },
    audit,
  });
  return { gw, origin };
}

beforeAll(async () => {
  everything = await startEverythingServer();
  const [entraPort, plainPort] = [await freePort(), await freePort()];
  idp = await startGatewayIdp(`http://127.0.0.1:${entraPort}`, IDP_CLIENT, 300, {
    resource: 'refused',
    backchannelLogout: true,
    moreGatewayOrigins: [`http://127.0.0.1:${plainPort}`],
    provider: {
      accountClaims: (sub) => ACCOUNTS[sub] ?? {},
      claims: { openid: ['sub'], profile: ['oid', 'name'] },
      extraParams: ['domain_hint', 'prompt_hint'],
      // As Entra: the ID token of a code flow carries the profile claims (oid among them).
      conformIdTokenClaims: false,
    },
  });
  chooseIdpLogin(idp, () => ({ accountId: account }));
  onIdpTokens(idp, (ctx) => tokenParams.push({ ...ctx.oidc.params }));
  plain = await startGateway(plainPort, {});
  entra = await startGateway(entraPort, { send_resource: false, subject_claim: 'oid', extra_authorize_params: { domain_hint: 'example.com', prompt_hint: 'x y' } });
}, 90_000);

afterAll(async () => {
  await Promise.all([plain?.gw.stop(), entra?.gw.stop()]);
  await idp?.close();
  await everything?.close();
});

/** The walk stopped at an error page of `gw`'s callback: no code reached the client. */
function expectErrorPage(gw: Gateway, walked: WalkedSignIn, text: string) {
  expect(walked.back, walked.back?.href).toBeUndefined();
  expect(walked.page?.url.startsWith(`${gw.origin}${IDP_CALLBACK_PATH}`)).toBe(true);
  expect(walked.page?.status, walked.page?.body.slice(0, 400)).toBe(502);
  expect(walked.page?.body).toContain(text);
}

async function logoutToken(claims: Record<string, unknown>): Promise<string> {
  const jwk = idp.signingJwk;
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ iss: idp.issuer, aud: IDP_CLIENT.client_id, iat: now, jti: randomUUID(), events: { [BACKCHANNEL_EVENT]: {} }, ...claims })
    .setProtectedHeader({ alg: jwk.alg!, kid: jwk.kid, typ: 'logout+jwt' })
    .sign(await importJWK(jwk, jwk.alg));
}

describe('oidc login against an IdP that behaves as Entra ID does (oidc-provider standing in)', () => {
  it('send_resource left true: the IdP refuses the resource, and the user sees an error page naming the setting; no code', async () => {
    account = 'alice';
    const app = await registerPublicClient(plain.origin, 'Quirks app');
    const walked = await walkSignIn(plain.origin, app, resourceOf(plain));
    expect(idp.authorizationRequests.at(-1)?.get('resource')).toBe(resourceOf(plain));
    expectErrorPage(plain, walked, 'invalid_target');
    expect(walked.page?.body).toContain('send_resource');
    expect(audit.events).toContainEqual(expect.objectContaining({ event: 'idp_login', outcome: 'error', error: 'invalid_target', client_id: app.id }));
  }, 60_000);

  it('send_resource false, subject_claim oid: signed in, the token sub is the oid; no resource at the IdP, the extra parameters there', async () => {
    account = 'alice';
    const app = await registerPublicClient(entra.origin, 'Quirks app');
    const tokensBefore = tokenParams.length;
    const walked = await walkSignIn(entra.origin, app, resourceOf(entra));
    const tokens = await redeemCode(entra.origin, app, walked);
    expect(decodeJwt(tokens.access_token)).toMatchObject({ sub: ACCOUNTS.alice!.oid, aud: resourceOf(entra), client_id: app.id });

    const asked = idp.authorizationRequests.at(-1)!;
    expect(asked.has('resource')).toBe(false);
    expect(asked.get('domain_hint')).toBe('example.com');
    expect(asked.get('prompt_hint')).toBe('x y');
    // oidc-provider itself read them as parameters of the request.
    expect(idp.interactions.at(-1)!.params).toMatchObject({ domain_hint: 'example.com', prompt_hint: 'x y', redirect_uri: `${entra.origin}${IDP_CALLBACK_PATH}` });
    // The code exchange carried no resource either.
    const exchanges = tokenParams.slice(tokensBefore);
    expect(exchanges.map((p) => p.grant_type)).toContain('authorization_code');
    for (const p of exchanges) expect(p.resource).toBeUndefined();
    expect(audit.events).toContainEqual(expect.objectContaining({ event: 'idp_login', outcome: 'success', sub: ACCOUNTS.alice!.oid }));
  }, 60_000);

  it('an ID token without the oid, or with one that is not a string: an error page, no code', async () => {
    const app = await registerPublicClient(entra.origin, 'Quirks app');
    for (const who of ['no-oid', 'number-oid', 'object-oid']) {
      account = who;
      const walked = await walkSignIn(entra.origin, app, resourceOf(entra));
      expectErrorPage(entra, walked, 'login.subject_claim');
    }
    account = 'alice';
    expect(audit.events.filter((e) => e.event === 'idp_login' && e.error === 'no_subject')).toHaveLength(3);
  }, 90_000);

  it('back-channel logout naming the IdP sub ends the grant whose gateway sub is the oid', async () => {
    account = 'alice';
    const app = await registerPublicClient(entra.origin, 'Quirks app');
    const tokens = await redeemCode(entra.origin, app, await walkSignIn(entra.origin, app, resourceOf(entra)));
    const refresh = (token: string) =>
      fetch(`${entra.origin}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: token, client_id: app.id }) });
    const first = await refresh(tokens.refresh_token!);
    expect(first.status).toBe(200);
    const live = ((await first.json()) as { refresh_token: string }).refresh_token;

    const logout = await fetch(`${entra.origin}${IDP_BACKCHANNEL_LOGOUT_PATH}`, { method: 'POST', body: new URLSearchParams({ logout_token: await logoutToken({ sub: 'alice' }) }) });
    expect(logout.status).toBe(200);
    expect(audit.events).toContainEqual(expect.objectContaining({ event: 'idp_logout', by: 'sub' }));
    const after = await refresh(live);
    expect(after.status).toBe(400);
    expect(await after.json()).toMatchObject({ error: 'invalid_grant' });
  }, 60_000);
});
