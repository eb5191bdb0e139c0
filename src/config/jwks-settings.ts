// `jwks:` in gateway.yaml: how long an external issuer's key set (token.jwt of the routes, the
// built-in AS's enterprise IdPs) is used before it is fetched again, and how long one fetch of it
// (or of the issuer's metadata) may take. Checked once at load; the key sets are shared by every
// route and kept across reloads (auth/jwks.ts), so a change applies at the next start. Its own
// module: a new concern, kept out of the crowded schema and resolver.
import { z } from 'zod';
import { parseDuration } from './duration.js';

export const DEFAULT_JWKS_CACHE_MAX_AGE = '10m';
export const DEFAULT_JWKS_FETCH_TIMEOUT = '5s';
/** Shorter, and every replica asks the IdP for its keys several times a minute for nothing. */
const MIN_CACHE_MAX_AGE_MS = 60_000;
/** Longer, and a key the IdP removed (compromised) is trusted for more than a day: an unknown kid refetches anyway. */
const MAX_CACHE_MAX_AGE_MS = 24 * 3_600_000;
const MIN_FETCH_TIMEOUT_MS = 100;
/** A request waiting for keys waits this long: past a minute, no client is still there. */
const MAX_FETCH_TIMEOUT_MS = 60_000;

const PATTERN = /^[1-9][0-9]*(ms|s|m|h)$/;

const within = (min: number, max: number) => (text: string) => {
  // zod runs this even when the pattern failed: that failure is the one to report.
  if (!PATTERN.test(text)) return true;
  const ms = parseDuration(text);
  return ms >= min && ms <= max;
};

export const JwksSettingsSchema = z
  .strictObject({
    cache_max_age: z
      .string()
      .regex(PATTERN, 'expected a duration such as 10m or 1h')
      .refine(within(MIN_CACHE_MAX_AGE_MS, MAX_CACHE_MAX_AGE_MS), 'expected from 1m to 24h')
      .default(DEFAULT_JWKS_CACHE_MAX_AGE)
      .describe('a key set is fetched again once it is older than this (a token signed with an unknown kid fetches it at once, at most every 30 s). From 1m to 24h'),
    fetch_timeout: z
      .string()
      .regex(PATTERN, 'expected a duration such as 5s or 500ms')
      .refine(within(MIN_FETCH_TIMEOUT_MS, MAX_FETCH_TIMEOUT_MS), 'expected from 100ms to 60s')
      .default(DEFAULT_JWKS_FETCH_TIMEOUT)
      .describe('one request for a key set or an issuer\'s metadata: a token that needs keys not fetched by then is answered 503. From 100ms to 60s'),
  })
  .default({ cache_max_age: DEFAULT_JWKS_CACHE_MAX_AGE, fetch_timeout: DEFAULT_JWKS_FETCH_TIMEOUT })
  .describe("external issuers' signing keys (token.jwt, enterprise IdPs): how long they are used, and how long a fetch may take");

/** `jwks:` resolved (GatewayConfig.jwks). */
export interface JwksSettings {
  cacheMaxAgeMs: number;
  fetchTimeoutMs: number;
}

export function resolveJwksSettings(file: z.infer<typeof JwksSettingsSchema>): JwksSettings {
  return { cacheMaxAgeMs: parseDuration(file.cache_max_age), fetchTimeoutMs: parseDuration(file.fetch_timeout) };
}
