/**
 * A real MCP SDK client (Client + StreamableHTTPClientTransport) that completes the MCP OAuth
 * flow without a browser: discovery from the server's 401 (RFC 9728 → RFC 8414 / OIDC), dynamic
 * registration, authorization_code + PKCE with `resource`, token refresh — all done by the SDK;
 * this file only plays the user agent (follows the authorization redirects with a cookie jar and
 * picks the `code` off the redirect to the loopback `redirect_uri`, which nothing listens on).
 */
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import { freePort } from './net.js';

/** A page that is not a redirect (e.g. a consent form): return the next request to make, or undefined to fail. */
export type PageHandler = (page: {
  url: URL;
  status: number;
  headers: Headers;
  body: string;
}) => Promise<{ url: string | URL; method?: string; body?: URLSearchParams } | undefined>;

/**
 * Plays the browser: requests `authorizationUrl` and follows redirects (keeping cookies per host)
 * until one points at `redirectUri`; returns that callback URL (with `code`/`state`/`iss` or `error`).
 */
export async function followAuthorization(
  authorizationUrl: string | URL,
  redirectUri: string | URL,
  opts: { onPage?: PageHandler; maxSteps?: number } = {},
): Promise<URL> {
  const callback = new URL(redirectUri);
  const jar = new Map<string, Map<string, string>>(); // host → name → value
  let next: { url: URL; method: string; body?: URLSearchParams } = { url: new URL(authorizationUrl), method: 'GET' };
  for (let step = 0; step < (opts.maxSteps ?? 20); step++) {
    const cookies = jar.get(next.url.host) ?? new Map<string, string>();
    jar.set(next.url.host, cookies);
    const res = await fetch(next.url, {
      method: next.method,
      body: next.body,
      redirect: 'manual',
      headers: { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') },
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair = '', ...attrs] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const expired = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a) || /^\s*expires=.*1970/i.test(a));
      if (expired || value === '') cookies.delete(name);
      else cookies.set(name, value);
    }
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel();
      const target = new URL(location, next.url);
      if (target.origin === callback.origin && target.pathname === callback.pathname) return target;
      next = { url: target, method: 'GET' };
      continue;
    }
    const page = { url: next.url, status: res.status, headers: res.headers, body: await res.text() };
    const submit = await opts.onPage?.(page);
    if (!submit) throw new Error(`authorization stopped at ${page.status} ${page.url.href}: ${page.body.slice(0, 500)}`);
    next = { url: new URL(submit.url, next.url), method: submit.method ?? 'GET', body: submit.body };
  }
  throw new Error('authorization did not reach the redirect_uri (too many steps)');
}

export interface HeadlessOAuthOptions {
  /** Loopback redirect URI (default `http://127.0.0.1:<free port>/callback`). */
  redirectUrl?: string;
  /** Fallback scope, used only if neither WWW-Authenticate nor the resource metadata name scopes. */
  scope?: string;
  /** Overrides for the dynamic registration metadata. */
  clientMetadata?: Partial<OAuthClientMetadata>;
  /** Handles non-redirect pages (consent forms) during authorization. */
  onPage?: PageHandler;
  /** A client registered beforehand: the SDK then skips its own registration. */
  registeredClient?: OAuthClientInformationMixed;
}

/** An OAuthClientProvider whose `redirectToAuthorization` runs the whole user-agent leg headlessly. */
export class HeadlessOAuthProvider implements OAuthClientProvider {
  private client?: OAuthClientInformationMixed;
  private savedTokens?: OAuthTokens;
  private verifier?: string;
  private expectedState?: string;
  private code?: string;
  /** Every authorization request URL the SDK built (assert `resource`, `scope`, PKCE on these). */
  readonly authorizationUrls: URL[] = [];

  constructor(
    readonly redirectUrl: string,
    private readonly opts: HeadlessOAuthOptions = {},
  ) {
    this.client = opts.registeredClient;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'mcp-auth-gateway test harness',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      ...(this.opts.scope ? { scope: this.opts.scope } : {}),
      ...this.opts.clientMetadata,
    };
  }

  state(): string {
    this.expectedState = randomBytes(16).toString('base64url');
    return this.expectedState;
  }

  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info;
  }
  tokens() {
    return this.savedTokens;
  }
  saveTokens(tokens: OAuthTokens) {
    this.savedTokens = tokens;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier(): string {
    if (!this.verifier) throw new Error('no PKCE code verifier saved');
    return this.verifier;
  }
  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery') {
    if (scope === 'all' || scope === 'client') this.client = undefined;
    if (scope === 'all' || scope === 'tokens') this.savedTokens = undefined;
    if (scope === 'all' || scope === 'verifier') this.verifier = undefined;
  }

  async redirectToAuthorization(authorizationUrl: URL): Promise<void> {
    this.authorizationUrls.push(authorizationUrl);
    const cb = await followAuthorization(authorizationUrl, this.redirectUrl, { onPage: this.opts.onPage });
    const error = cb.searchParams.get('error');
    if (error) throw new Error(`authorization failed: ${error}: ${cb.searchParams.get('error_description') ?? ''}`);
    if (cb.searchParams.get('state') !== this.expectedState) throw new Error('authorization response state mismatch');
    this.code = cb.searchParams.get('code') ?? undefined;
    if (!this.code) throw new Error(`no code in ${cb.href}`);
  }

  /** The code captured by the last `redirectToAuthorization` (consumed). */
  takeAuthorizationCode(): string {
    const { code } = this;
    if (!code) throw new Error('no authorization code captured');
    this.code = undefined;
    return code;
  }
}

export interface OAuthConnection {
  client: Client;
  transport: StreamableHTTPClientTransport;
  provider: HeadlessOAuthProvider;
  tokens(): OAuthTokens | undefined;
  close(): Promise<void>;
}

const clientInfo = { name: 'mcp-auth-gateway-harness', version: '0.0.0' };

/**
 * Connects the SDK client to `serverUrl`, authorizing through whatever AS the server's 401 and
 * protected resource metadata point at: connect → UnauthorizedError (the headless provider has
 * the code by then) → `transport.finishAuth(code)` → connect again with a new transport.
 */
export async function connectWithOAuth(serverUrl: string, opts: HeadlessOAuthOptions = {}): Promise<OAuthConnection> {
  const redirectUrl = opts.redirectUrl ?? `http://127.0.0.1:${await freePort()}/callback`;
  const provider = new HeadlessOAuthProvider(redirectUrl, opts);
  const url = new URL(serverUrl);

  let transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  let client = new Client(clientInfo);
  try {
    await client.connect(transport);
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
    await transport.finishAuth(provider.takeAuthorizationCode());
    await client.close();
    transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
    client = new Client(clientInfo);
    await client.connect(transport);
  }
  return { client, transport, provider, tokens: () => provider.tokens(), close: () => client.close() };
}

/** An SDK client that sends a fixed `Authorization: Bearer <token>` (no OAuth handling). */
export async function connectWithToken(serverUrl: string, token: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(serverUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client(clientInfo);
  await client.connect(transport);
  return client;
}
