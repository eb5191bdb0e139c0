/**
 * A small OAuth 2.0 server WITHOUT OpenID Connect, standing in for GitHub (a cloud IdP cannot run
 * here): no discovery, no ID token, no `iss` in its answers; GitHub's paths and habits —
 * `/login/oauth/authorize`, `/login/oauth/access_token` (client_secret_post in the form body; JSON
 * only when asked with `Accept: application/json`; errors answered with **200** and an `error`
 * member, as GitHub does), and a user endpoint `/user` read with `Authorization: Bearer` whose
 * JSON names the user by a numeric `id`. It checks what GitHub checks: the client id, the exact
 * registered redirect URI, a code used once, and PKCE S256 (the verifier against the challenge of
 * the authorization request that issued the code). It signs in, without any page, whichever user
 * the test chose; knobs make the token or user endpoint fail.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listen } from './net.js';

export interface OAuth2IdpClient {
  client_id: string;
  client_secret: string;
  redirect_uri: string;
}

export interface OAuth2Idp {
  /** `http://127.0.0.1:<port>`. */
  origin: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  userinfoEndpoint: string;
  /** Who the next authorization signs in: a user JSON object, or `deny` (access_denied). */
  next: { user: Record<string, unknown> } | 'deny';
  /** The token endpoint's next answers: `ok`, or GitHub's 200 + `error`. */
  tokenAnswer: 'ok' | 'error';
  /** The user endpoint's next answers: `ok`, or a 500. */
  userAnswer: 'ok' | 'error';
  /** Every authorization request's query, in order. */
  authorizeRequests: URLSearchParams[];
  /** Every token request's form body, in order. */
  tokenRequests: URLSearchParams[];
  /** Outcomes of the PKCE check at the token endpoint, in order. */
  pkce: ('verified' | 'refused')[];
  close(): Promise<void>;
}

interface IssuedCode {
  user: Record<string, unknown>;
  challenge: string;
  redirectUri: string;
}

const S256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

export async function startOAuth2Idp(client: OAuth2IdpClient): Promise<OAuth2Idp> {
  const codes = new Map<string, IssuedCode>();
  const accessTokens = new Map<string, Record<string, unknown>>();
  const server = createServer();
  const port = await listen(server, 0);
  const origin = `http://127.0.0.1:${port}`;
  const idp: OAuth2Idp = {
    origin,
    authorizationEndpoint: `${origin}/login/oauth/authorize`,
    tokenEndpoint: `${origin}/login/oauth/access_token`,
    userinfoEndpoint: `${origin}/user`,
    next: { user: { id: 4242, login: 'alice' } },
    tokenAnswer: 'ok',
    userAnswer: 'ok',
    authorizeRequests: [],
    tokenRequests: [],
    pkce: [],
    close: () => closeServer(server),
  };

  const authorize = (query: URLSearchParams, res: ServerResponse) => {
    idp.authorizeRequests.push(query);
    // As GitHub: a wrong client or redirect URI is a page at the IdP, never a redirect.
    if (query.get('client_id') !== client.client_id || query.get('redirect_uri') !== client.redirect_uri) return res.writeHead(400).end('unknown client or redirect_uri');
    const back = new URL(client.redirect_uri);
    back.searchParams.set('state', query.get('state') ?? '');
    if (idp.next === 'deny') {
      back.searchParams.set('error', 'access_denied');
    } else {
      if (!query.get('code_challenge') || query.get('code_challenge_method') !== 'S256') return res.writeHead(400).end('PKCE S256 required');
      const code = randomBytes(20).toString('hex');
      codes.set(code, { user: idp.next.user, challenge: query.get('code_challenge')!, redirectUri: client.redirect_uri });
      back.searchParams.set('code', code);
    }
    res.writeHead(302, { location: back.href }).end();
  };

  const token = (form: URLSearchParams, req: IncomingMessage, res: ServerResponse) => {
    idp.tokenRequests.push(form);
    const answer = (body: Record<string, string>) => {
      const json = (req.headers.accept ?? '').includes('application/json');
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-www-form-urlencoded' }).end(json ? JSON.stringify(body) : new URLSearchParams(body).toString());
    };
    const refuse = (error: string) => answer({ error, error_description: `refused: ${error}` });
    if (form.get('client_id') !== client.client_id || form.get('client_secret') !== client.client_secret) return refuse('incorrect_client_credentials');
    const code = form.get('code') ?? '';
    const issued = codes.get(code);
    codes.delete(code);
    if (!issued || form.get('redirect_uri') !== issued.redirectUri) return refuse('bad_verification_code');
    const verified = S256(form.get('code_verifier') ?? '') === issued.challenge;
    idp.pkce.push(verified ? 'verified' : 'refused');
    if (!verified || idp.tokenAnswer === 'error') return refuse('bad_verification_code');
    const accessToken = `gho_${randomBytes(18).toString('base64url')}`;
    accessTokens.set(accessToken, issued.user);
    answer({ access_token: accessToken, token_type: 'bearer', scope: 'read:user' });
  };

  const user = (req: IncomingMessage, res: ServerResponse) => {
    const found = accessTokens.get((req.headers.authorization ?? '').replace(/^Bearer /, ''));
    if (!found) return res.writeHead(401, { 'content-type': 'application/json' }).end('{"message":"Bad credentials"}');
    if (idp.userAnswer === 'error') return res.writeHead(500, { 'content-type': 'application/json' }).end('{"message":"Server Error"}');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(found));
  };

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', origin);
    if (req.method === 'GET' && url.pathname === '/login/oauth/authorize') return authorize(url.searchParams, res);
    if (req.method === 'GET' && url.pathname === '/user') return user(req, res);
    if (req.method === 'POST' && url.pathname === '/login/oauth/access_token') {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => token(new URLSearchParams(Buffer.concat(chunks).toString('utf8')), req, res));
      return;
    }
    res.writeHead(404).end();
  });
  return idp;
}
