/**
 * A local stand-in for GitHub's remote MCP server and its OAuth app authorization server, with
 * what sets GitHub apart from an RFC 8414 AS: no metadata of any kind (the gateway must be given
 * `authorization_endpoint` and `token_endpoint`), a confidential client (client_id and
 * client_secret, in the body or as Basic), a token endpoint that answers
 * `application/x-www-form-urlencoded` unless asked for `Accept: application/json`, errors at that
 * endpoint with status 200, no refresh token and no expiry (an OAuth app without expiring tokens),
 * no RFC 9207 `iss`. PKCE S256 is checked when the request carried a challenge, as GitHub does.
 * The MCP server (the TS SDK's, as in oauth-protected-upstream.ts) accepts only tokens this AS
 * issued and not revoked, and answers a bare `Bearer` 401 otherwise. Every request to the AS is
 * recorded, so a test can say what the gateway sent.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listen } from './net.js';
import { serveMcp } from './oauth-protected-upstream.js';

export const GITHUB_LIKE_PATHS = { authorize: '/login/oauth/authorize', token: '/login/oauth/access_token', mcp: '/mcp' } as const;

export interface GithubLikeUpstream {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  client: { id: string; secret: string };
  /** Query of every authorization request. */
  authorizationRequests: URLSearchParams[];
  /** Every token request: its form, headers and how it was answered. */
  tokenRequests: { form: URLSearchParams; accept: string; basicAuth: boolean; answeredAs: 'json' | 'form'; error?: string }[];
  /** Every access token handed out, with the account it belongs to. */
  issued: Map<string, string>;
  /** The accounts whose calls reached the MCP server, in order. */
  seen: string[];
  /** The account the headless login signs in next; undefined: the user declines (access_denied). */
  signInAs(account: string | undefined): void;
  /** The user revokes the app at the upstream: all of `account`'s tokens stop working. */
  revokeAll(account: string): void;
  close(): Promise<void>;
}

interface IssuedCode {
  account: string;
  redirectUri: string;
  challenge?: string;
  expiresAt: number;
}

/** `redirectUri`: the one callback registered for the OAuth app (the gateway's, for this route). */
export async function startGithubLikeUpstream(redirectUri: string): Promise<GithubLikeUpstream> {
  const server = createServer();
  const port = await listen(server);
  const base = `http://127.0.0.1:${port}`;
  const codes = new Map<string, IssuedCode>();
  let account: string | undefined;
  const handle: GithubLikeUpstream = {
    url: `${base}${GITHUB_LIKE_PATHS.mcp}`,
    authorizationEndpoint: `${base}${GITHUB_LIKE_PATHS.authorize}`,
    tokenEndpoint: `${base}${GITHUB_LIKE_PATHS.token}`,
    client: { id: `Iv1.${randomBytes(8).toString('hex')}`, secret: randomBytes(20).toString('hex') },
    authorizationRequests: [],
    tokenRequests: [],
    issued: new Map(),
    seen: [],
    signInAs: (a) => (account = a),
    revokeAll: (a) => {
      for (const [token, owner] of handle.issued) if (owner === a) handle.issued.delete(token);
    },
    close: () => closeServer(server),
  };

  const authorize = (query: URLSearchParams, res: ServerResponse) => {
    handle.authorizationRequests.push(query);
    // GitHub shows an error page (no redirect) for an unknown client or a redirect_uri not registered.
    if (query.get('client_id') !== handle.client.id || (query.get('redirect_uri') ?? redirectUri) !== redirectUri) return void res.writeHead(400).end('bad client or redirect_uri');
    const back = new URL(redirectUri);
    back.searchParams.set('state', query.get('state') ?? '');
    if (account === undefined) back.searchParams.set('error', 'access_denied');
    else {
      const method = query.get('code_challenge_method');
      if (query.has('code_challenge') && method !== 'S256') return void res.writeHead(400).end('unsupported code_challenge_method');
      const code = randomBytes(10).toString('hex');
      codes.set(code, { account, redirectUri, challenge: query.get('code_challenge') ?? undefined, expiresAt: Date.now() + 600_000 });
      back.searchParams.set('code', code);
    }
    res.writeHead(302, { location: back.href }).end();
  };

  const token = (req: IncomingMessage, form: URLSearchParams, res: ServerResponse) => {
    const accept = req.headers.accept ?? '';
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    const [basicId, basicSecret] = basic ? Buffer.from(basic, 'base64').toString().split(':').map(decodeURIComponent) : [];
    const clientId = basicId ?? form.get('client_id');
    const secret = basicSecret ?? form.get('client_secret');
    const code = codes.get(form.get('code') ?? '');
    codes.delete(form.get('code') ?? '');
    let answer: Record<string, string>;
    if (clientId !== handle.client.id || secret !== handle.client.secret) answer = { error: 'incorrect_client_credentials' };
    else if (form.get('grant_type') === 'refresh_token') answer = { error: 'bad_refresh_token' };
    else if (!code || code.expiresAt < Date.now() || (form.get('redirect_uri') ?? code.redirectUri) !== code.redirectUri) answer = { error: 'bad_verification_code' };
    else if (code.challenge && createHash('sha256').update(form.get('code_verifier') ?? '').digest('base64url') !== code.challenge) answer = { error: 'bad_verification_code' };
    else {
      const accessToken = `gho_${randomBytes(18).toString('base64url')}`;
      handle.issued.set(accessToken, code.account);
      answer = { access_token: accessToken, scope: 'repo', token_type: 'bearer' };
    }
    const json = accept.includes('application/json');
    handle.tokenRequests.push({ form, accept, basicAuth: basic !== undefined, answeredAs: json ? 'json' : 'form', ...(answer.error && { error: answer.error }) });
    // Errors too are answered 200, as GitHub does.
    if (json) res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(answer));
    else res.writeHead(200, { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }).end(new URLSearchParams(answer).toString());
  };

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', base);
    if (url.pathname === GITHUB_LIKE_PATHS.authorize && req.method === 'GET') return authorize(url.searchParams, res);
    if (url.pathname === GITHUB_LIKE_PATHS.token && req.method === 'POST') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => token(req, new URLSearchParams(Buffer.concat(chunks).toString()), res));
      return;
    }
    if (url.pathname !== GITHUB_LIKE_PATHS.mcp) return void res.writeHead(404).end();
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const owner = bearer === undefined ? undefined : handle.issued.get(bearer);
    if (owner === undefined) return void res.writeHead(401, { 'www-authenticate': 'Bearer', 'content-type': 'application/json' }).end('{"message":"Bad credentials"}');
    handle.seen.push(owner);
    serveMcp(req, res, owner).catch(() => res.destroy());
  });
  return handle;
}
