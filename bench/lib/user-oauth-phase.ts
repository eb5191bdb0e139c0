// The `user_oauth` phase of `npm run bench` (issue 21, issue 23's goal): CPU per
// request of a route with `upstream_auth: user_oauth` whose grant is connected,
// against the same route with `upstream_auth: static`, in one gateway process
// (the build), interleaved rounds. Both routes take tokens of the gateway's
// built-in AS (dev login, obtained headlessly through its real consent and
// login pages) and send the upstream the same header: the grant's access token
// is the bench upstream's credential, sealed into a real redis-server by the
// gateway's own grant store (UpstreamGrants with account_tokens' key), so the
// two requests differ only in where the gateway finds that token.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { AccountTokenCipher } from '../../src/authorization-server/upstream-accounts/account-token-cipher.js';
import { UpstreamGrants } from '../../src/authorization-server/upstream-accounts/upstream-grants.js';
import { deriveKey } from '../../src/config/account-tokens.js';
import { createStore } from '../../src/store/create-store.js';
import { headlessUser } from '../../test/helpers/headless-user.js';
import { followAuthorization } from '../../test/helpers/mcp-client.js';
import { freePort } from '../../test/helpers/net.js';
import { startRedisServer } from '../../test/helpers/redis-server.js';
import { UPSTREAM_CREDENTIAL_VALUE } from './gateway.js';
import { interleave, type Log, type MeasuredTarget, type Runner } from './interleave.js';
import { MCP_HEADERS, type LoadSettings } from './load.js';
import { spawnReady } from './processes.js';
import { userOAuthSummary, type UserOAuthPhaseResult } from './user-oauth-summary.js';

const ROUTES = { static: '/static/mcp', user_oauth: '/user/mcp' } as const;
const USER = 'bench-user';

export interface UserOAuthPhaseOptions {
  upstreamOrigin: string;
  /** The node arguments that run `mcp-auth-gateway` (the build, or the sources through tsx). */
  gatewayArgs: string[];
  settings: LoadSettings;
  rounds: number;
  warmupSec: number;
  /** The program that runs gatewayArgs (default: this node; bench/user-oauth-cpu.ts: valgrind). */
  command?: string;
  /** Further top-level settings of gateway.yaml (limits a process slowed by valgrind cannot trip); `access_token_ttl` goes to the built-in AS. */
  extraConfig?: Record<string, unknown>;
  readyTimeoutMs?: number;
}

export async function measureUserOAuth(o: UserOAuthPhaseOptions, log: Log, run: Runner<LoadSettings>): Promise<UserOAuthPhaseResult> {
  const redis = await startRedisServer();
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const secrets = { SIGNING_KEY: JSON.stringify(await generateSigningKey()), TOKENS_KEY: randomBytes(32).toString('base64') };
  const keyPrefix = `bench-uo-${randomBytes(4).toString('hex')}:`;
  const configDir = await writeConfig(origin, port, redis.url, keyPrefix, o.upstreamOrigin, o.extraConfig);
  const gateway = await spawnReady('gateway-user-oauth', o.command ?? process.execPath, [...o.gatewayArgs, 'serve', '--config', configDir], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, BENCH_UPSTREAM_TOKEN: UPSTREAM_CREDENTIAL_VALUE, ...secrets },
    ready: (line) => (line.includes('"gateway listening"') ? true : undefined),
    readyTimeoutMs: o.readyTimeoutMs,
  });
  try {
    const staticToken = await builtinToken(origin, ROUTES.static);
    await seedGrant(staticToken, redis.url, keyPrefix, secrets.TOKENS_KEY, `${o.upstreamOrigin}/mcp`);
    // With the grant connected, consent for the user_oauth route makes no detour to the upstream AS.
    const userToken = await builtinToken(origin, ROUTES.user_oauth);
    const target = (name: keyof typeof ROUTES, token: string): MeasuredTarget => ({
      name,
      url: `${origin}${ROUTES[name]}`,
      headers: { ...MCP_HEADERS, authorization: `Bearer ${token}` },
      pid: gateway.pid,
    });
    const samples = await interleave([target('static', staticToken), target('user_oauth', userToken)], o.settings, o.rounds, o.warmupSec, log, run);
    return userOAuthSummary(samples);
  } finally {
    await gateway.stop();
    await redis.stop();
    await rm(configDir, { recursive: true, force: true });
  }
}

/** Two routes to the same upstream endpoint, alike but for upstream_auth; tokens of the built-in AS. */
async function writeConfig(origin: string, port: number, redisUrl: string, keyPrefix: string, upstreamOrigin: string, extra?: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'mag-bench-uo-'));
  const json = (value: unknown) => JSON.stringify(value) + '\n'; // YAML is a superset of JSON
  await writeFile(
    join(dir, 'gateway.yaml'),
    json({
      listen: { host: '127.0.0.1', port },
      public_url: origin,
      store: { kind: 'redis', url: redisUrl, key_prefix: keyPrefix },
      audit: { sink: 'none' },
      log_level: 'info',
      shutdown_grace: '2s',
      drain_delay: '0s',
      authorization_server: { enabled: true, login: { kind: 'dev' }, signing_key: { env: 'SIGNING_KEY' }, ...(extra?.access_token_ttl !== undefined && { access_token_ttl: extra.access_token_ttl }) },
      account: { enabled: true },
      account_tokens: { encryption_key: { env: 'TOKENS_KEY' } },
      ...Object.fromEntries(Object.entries(extra ?? {}).filter(([name]) => name !== 'access_token_ttl')),
    }),
  );
  const route = (path: string, upstreamAuth: unknown) => json({ path, upstream: `${upstreamOrigin}/mcp`, scopes_supported: ['mcp:read'], upstream_auth: upstreamAuth });
  await writeFile(join(dir, 'static.yaml'), route(ROUTES.static, { kind: 'static', header: 'Authorization', value: { env: 'BENCH_UPSTREAM_TOKEN' } }));
  await writeFile(join(dir, 'user.yaml'), route(ROUTES.user_oauth, { kind: 'user_oauth' }));
  return dir;
}

/** An access token of the built-in AS for `resource`: a registered public client, PKCE, consent and dev login played headlessly. */
async function builtinToken(origin: string, routePath: string): Promise<string> {
  const redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
  const registered = await fetch(`${origin}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'bench', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none', grant_types: ['authorization_code'] }),
  });
  const clientId = ((await registered.json()) as { client_id: string }).client_id;
  const verifier = oauth.generateRandomCodeVerifier();
  const authorize = new URL(`${origin}/authorize`);
  for (const [k, v] of Object.entries({ response_type: 'code', client_id: clientId, redirect_uri: redirectUri, code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state: 's', resource: `${origin}${routePath}` }))
    authorize.searchParams.set(k, v);
  const callback = await followAuthorization(authorize, redirectUri, { onPage: headlessUser(USER) });
  const code = callback.searchParams.get('code');
  if (!code) throw new Error(`user_oauth phase: no code for ${routePath}: ${callback.href}`);
  const res = await fetch(`${origin}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: redirectUri, client_id: clientId }) });
  const body = (await res.json()) as { access_token?: string };
  if (!body.access_token) throw new Error(`user_oauth phase: token request failed: ${JSON.stringify(body)}`);
  return body.access_token;
}

/**
 * The principal's grant for the user_oauth route, written by the gateway's own grant store (sealed
 * with the account_tokens key, under its key class): the bench upstream's credential, no expiry, so
 * no refresh runs during the measure.
 */
async function seedGrant(principalToken: string, redisUrl: string, keyPrefix: string, tokensKey: string, resource: string): Promise<void> {
  const { iss, sub } = decodeJwt(principalToken);
  if (!iss || !sub) throw new Error('user_oauth phase: the built-in AS token names no issuer or subject');
  const store = createStore({ kind: 'redis', url: redisUrl, keyPrefix, commandTimeoutMs: 2000, requireNoeviction: false, maxClockSkewMs: 30_000 });
  try {
    const now = Date.now();
    const grants = new UpstreamGrants(store, new AccountTokenCipher([deriveKey(tokensKey)]), 3_600_000);
    await grants.save({ issuer: iss, subject: sub, routePath: ROUTES.user_oauth }, { accessToken: UPSTREAM_CREDENTIAL_VALUE, obtainedAt: now, connectedAt: now, scopes: [], asIssuer: new URL(resource).origin, resource });
  } finally {
    await store.close();
  }
}
