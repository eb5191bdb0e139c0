// Settings that are valid but almost always a mistake a new user makes: warned
// about by `check` and at start-up, never refused (each has a legitimate use).
import { redactUrl } from './urls.js';

/** The gateway forwards to exactly the upstream URL, so without a path the client gets the server's home page (often a 404). */
export function upstreamWithoutPath(upstream: string): string | undefined {
  if (new URL(upstream).pathname !== '/') return undefined;
  return `${redactUrl(upstream)} has no path: requests go to exactly this URL, and an MCP endpoint almost always has one (such as /mcp)`;
}

/**
 * The issuer is compared with the token's `iss` and the metadata's `issuer`
 * exactly: a trailing slash that the IdP does not write makes every request
 * fail. Some IdPs (Auth0) do write one, so it is only a warning.
 */
export function issuerWithTrailingSlash(issuer: string): string | undefined {
  if (!issuer.endsWith('/')) return undefined;
  return `${redactUrl(issuer)} ends with a slash: it must equal the tokens' iss exactly (most IdPs write none); check --online compares it with the issuer's metadata`;
}
