// `upstream_auth: { kind: user_oauth }` (DESIGN §8.1): the gateway is an OAuth
// client of the upstream's own authorization server and holds one grant per
// user. The file format (zod, no transforms) and its resolution to the runtime
// config, kept apart from schema.ts and resolve.ts, which compose them.
import { z } from 'zod';
import type { ConfigPath } from './yaml-file.js';

/** The schema pieces user_oauth needs from schema.ts (passed in: schema.ts imports this file). */
export interface UserOAuthSchemaParts {
  HttpUrl: z.ZodType<string>;
  SecretRef: z.ZodType<{ env: string } | { file: string }>;
  Scope: z.ZodType<string>;
}

export function userOAuthSchema({ HttpUrl, SecretRef, Scope }: UserOAuthSchemaParts) {
  return z
    .strictObject({
      kind: z.literal('user_oauth'),
      issuer: HttpUrl.optional().describe("the upstream AS's issuer (its RFC 8414 / OpenID metadata); default: discovered from the upstream's 401 and its RFC 9728 metadata"),
      authorization_endpoint: HttpUrl.optional().describe('for an AS without metadata (GitHub): with token_endpoint, used instead of any metadata'),
      token_endpoint: HttpUrl.optional().describe('for an AS without metadata (GitHub): with authorization_endpoint'),
      revocation_endpoint: HttpUrl.optional().describe('RFC 7009, called on Disconnect; default: from the metadata, else none (the grant is only deleted)'),
      client_id: z.string().min(1).optional().describe("the gateway's client at the upstream AS; default: its client ID metadata document where the AS supports them and public_url is https, else dynamic registration there (RFC 7591), kept in the store for every user"),
      client_secret: SecretRef.optional().describe('sent as client_secret_basic (client_secret_post when the metadata lists only that); omitted: a public client'),
      scopes: z.array(Scope).default([]).describe('asked of the upstream AS; default: the scopes its RFC 9728 metadata lists, else none'),
      resource: HttpUrl.optional().describe('RFC 8707 resource of the upstream grant; default: the upstream URL'),
      send_resource: z.boolean().default(true).describe('send `resource` to the upstream AS (false for ASes that refuse it)'),
    })
    .refine((u) => (u.authorization_endpoint === undefined) === (u.token_endpoint === undefined), {
      message: 'authorization_endpoint and token_endpoint go together (an AS without metadata needs both)',
      path: ['authorization_endpoint'],
    })
    .refine((u) => u.client_secret === undefined || u.client_id !== undefined, { message: 'client_secret needs client_id', path: ['client_secret'] })
    .refine((u) => u.authorization_endpoint === undefined || u.client_id !== undefined, {
      message: 'an AS without metadata has no registration endpoint to discover: set client_id',
      path: ['client_id'],
    });
}

type UserOAuthFile = z.infer<ReturnType<typeof userOAuthSchema>>;

/** The resolved `user_oauth` settings of one route. */
export interface UserOAuthConfig {
  kind: 'user_oauth';
  issuer?: string;
  /** Both or neither: explicit endpoints replace discovery. */
  endpoints?: { authorization: string; token: string };
  revocationEndpoint?: string;
  clientId?: string;
  clientSecret?: string;
  scopes: string[];
  /** RFC 8707 resource of the upstream grant (default the upstream URL). */
  resource: string;
  sendResource: boolean;
}

/** What resolving needs from resolve.ts: secrets read with their position, issues and warnings recorded. */
export interface UserOAuthResolving {
  secret(path: ConfigPath, ref: { env: string } | { file: string }): Promise<string>;
  warnHttp(path: ConfigPath, url: string): void;
}

export async function resolveUserOAuth(u: UserOAuthFile, upstream: string, r: UserOAuthResolving): Promise<UserOAuthConfig> {
  const base = ['upstream_auth'];
  for (const name of ['issuer', 'authorization_endpoint', 'token_endpoint', 'revocation_endpoint'] as const) {
    const url = u[name];
    if (url) r.warnHttp([...base, name], url);
  }
  return {
    kind: 'user_oauth',
    issuer: u.issuer,
    endpoints: u.authorization_endpoint && u.token_endpoint ? { authorization: u.authorization_endpoint, token: u.token_endpoint } : undefined,
    revocationEndpoint: u.revocation_endpoint,
    clientId: u.client_id,
    clientSecret: u.client_secret && (await r.secret([...base, 'client_secret'], u.client_secret)),
    scopes: u.scopes,
    resource: u.resource ?? upstream,
    sendResource: u.send_resource,
  };
}

/**
 * Why a route's user_oauth cannot work in this gateway, or undefined: the
 * connect page signs users in with the built-in AS's login (on the account
 * pages), the principal must be that AS's user, and grants need the key.
 */
export function userOAuthPlacementProblem(facts: { accountPage: boolean; builtinTokens: boolean; accountTokens: boolean; stdio: boolean }): string | undefined {
  if (facts.stdio) return undefined; // refused for stdio routes already
  if (!facts.accountPage) return 'user_oauth needs the built-in authorization server and account: { enabled: true } (the connect page signs users in there and /account/apps lists their upstream accounts)';
  if (!facts.builtinTokens) return "user_oauth needs this route's tokens from the built-in authorization server (no token: section): an upstream grant belongs to one of its users";
  if (!facts.accountTokens) return 'user_oauth needs account_tokens: { encryption_key: ... } in gateway.yaml (upstream tokens are kept encrypted)';
  return undefined;
}
