/**
 * What an OAuth client sends the built-in authorization server, written out
 * by hand (the MCP SDK's own flow is in mcp-client.ts): a public client's
 * registration, PKCE S256, /authorize URLs, and a GET that shows the redirect.
 */
import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { freePort } from './net.js';

/** A fresh PKCE code verifier (RFC 7636 §4.1). */
export const newVerifier = () => randomBytes(32).toString('base64url');
/** The S256 code challenge of `verifier` (RFC 7636 §4.2). */
export const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');
/** RFC 7636 Appendix B's challenge: a well-formed S256 challenge where no verifier is ever redeemed. */
export const RFC7636_CHALLENGE = s256('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk');

export interface PublicClient {
  id: string;
  redirectUri: string;
}

/** Registers a public client (no secret) for the code and refresh grants; its redirect URI is a free loopback port's `path`. */
export async function registerPublicClient(issuer: string, clientName: string, path = '/callback'): Promise<PublicClient> {
  const redirectUri = `http://127.0.0.1:${await freePort()}${path}`;
  const res = await fetch(`${issuer}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: clientName, redirect_uris: [redirectUri], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] }),
  });
  expect(res.status).toBe(201);
  return { id: ((await res.json()) as { client_id: string }).client_id, redirectUri };
}

/** Query parameters: a list repeats the parameter, undefined leaves it out. */
export type QueryParams = Record<string, string | string[] | undefined>;

/** `${issuer}/authorize` with `params` as its query, in their order. */
export function authorizeUrl(issuer: string, params: QueryParams): URL {
  const url = new URL(`${issuer}/authorize`);
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) url.searchParams.append(name, v);
  }
  return url;
}

export interface CodeRequest {
  client: PublicClient;
  verifier: string;
  state: string;
  resource: string;
  scope?: string;
}

/** The authorization-code request an MCP client sends: PKCE S256 over `verifier`, for one resource. */
export function codeRequestUrl(issuer: string, request: CodeRequest): URL {
  return authorizeUrl(issuer, {
    response_type: 'code',
    client_id: request.client.id,
    redirect_uri: request.client.redirectUri,
    code_challenge: s256(request.verifier),
    code_challenge_method: 'S256',
    state: request.state,
    resource: request.resource,
    scope: request.scope,
  });
}

/** A GET that does not follow a redirect: its status, headers (Location included) and body. */
export async function getManual(url: URL) {
  const res = await fetch(url, { redirect: 'manual' });
  return { status: res.status, headers: res.headers, body: await res.text() };
}
