// A token refused for its audience or issuer is logged with the value the
// route expects, so an operator sees the misconfiguration (the IdP's audience
// setting, a trailing slash) behind a client's bare 401. Never the token.
import type { Logger } from '../observability/logger.js';

export interface ClaimMismatch {
  claim: 'aud' | 'iss';
  expected: string;
  /** As the token (or introspection answer) had it; undefined when absent. */
  received: unknown;
}

export type OnClaimMismatch = (mismatch: ClaimMismatch) => void;

/** At info at most this often per route, so a flood of foreign tokens cannot flood the log; at debug otherwise. */
const INFO_INTERVAL_MS = 60_000;
/** The received claim is written by whoever made the token: bounded. */
const MAX_SHOWN_LENGTH = 200;
const MAX_SHOWN_AUDIENCES = 5;

export function logClaimMismatches(logger: Logger, route: string): OnClaimMismatch {
  let lastInfoAt = -Infinity;
  return ({ claim, expected, received }) => {
    const now = Date.now();
    const atInfo = now - lastInfoAt >= INFO_INTERVAL_MS;
    if (atInfo) lastInfoAt = now;
    const what = claim === 'aud' ? 'audience' : 'issuer';
    logger[atInfo ? 'info' : 'debug']({ route, claim, expected, received: shown(received) }, `token refused: its ${what} is not the one this route expects`);
  };
}

function shown(value: unknown): string | string[] | undefined {
  const bounded = (v: unknown) => (typeof v === 'string' ? v.slice(0, MAX_SHOWN_LENGTH) : `(${typeof v})`);
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.slice(0, MAX_SHOWN_AUDIENCES).map(bounded) : bounded(value);
}
