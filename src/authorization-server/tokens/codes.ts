// Authorization codes: 256-bit random, stored only as a key hash, alive at
// most 60 s, taken exactly once. A redeemed code leaves a marker naming its
// grant, so a replay can revoke what the code issued (RFC 6749 §4.1.2).
import { authorizationCodeKey, usedCodeKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import { randomToken } from '../helpers/secrets.js';

export const CODE_TTL_MS = 60_000;
/**
 * How long a redeemed code is remembered for replay detection: ten times its
 * life, past any replay that races the client's redemption, and short, so the
 * markers a flood of sign-ins leaves stay few (docs/storage.md).
 */
const USED_CODE_TTL_MS = 10 * CODE_TTL_MS;

export interface CodeRecord {
  clientId: string;
  redirectUri: string;
  redirectUriSent: boolean;
  codeChallenge: string;
  /** `dpop_jkt` of the request (RFC 9449 §10): redeemed only with a proof of this key. */
  dpopJkt?: string;
  resource: string;
  scopes: string[];
  subject: string;
  grantId: string;
  /** Seconds since the epoch. */
  authTime: number;
}

export class AuthorizationCodes {
  constructor(
    private readonly store: Store,
    private readonly ttlMs = CODE_TTL_MS,
  ) {}

  async issue(record: CodeRecord): Promise<string> {
    const code = randomToken(32);
    await this.store.set(authorizationCodeKey(code), JSON.stringify(record), this.ttlMs);
    return code;
  }

  async peek(code: string): Promise<CodeRecord | undefined> {
    return parse(await this.store.get(authorizationCodeKey(code)));
  }

  /** Atomic: of concurrent redemptions exactly one gets the record. */
  async take(code: string): Promise<CodeRecord | undefined> {
    return parse(await this.store.take(authorizationCodeKey(code)));
  }

  /** Written only once the redemption is known valid: the marker class is never evicted. */
  async markRedeemed(code: string, record: CodeRecord): Promise<void> {
    const redeemed: RedeemedCode = { grantId: record.grantId, clientId: record.clientId, codeChallenge: record.codeChallenge, ...(record.dpopJkt !== undefined && { dpopJkt: record.dpopJkt }) };
    await this.store.set(usedCodeKey(code), JSON.stringify(redeemed), USED_CODE_TTL_MS);
  }

  /** The grant a code was redeemed for, and what its own client presented, if it was redeemed. */
  async redeemedBy(code: string): Promise<RedeemedCode | undefined> {
    const value = await this.store.get(usedCodeKey(code));
    if (value === undefined) return undefined;
    // A marker of the release before names its grant only (gone within USED_CODE_TTL_MS of an upgrade).
    if (!value.startsWith('{')) return { grantId: value };
    return JSON.parse(value) as RedeemedCode;
  }
}

/** A redeemed code's marker: its grant, and who may replay it to revoke that grant (undefined: a marker of the release before). */
export interface RedeemedCode {
  grantId: string;
  clientId?: string;
  codeChallenge?: string;
  dpopJkt?: string;
}

function parse(value: string | undefined): CodeRecord | undefined {
  return value === undefined ? undefined : (JSON.parse(value) as CodeRecord);
}
