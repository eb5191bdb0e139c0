// Which grants each IdP session (`sid`) and each IdP user (`sub`) stand
// behind, so that a back-channel logout ends exactly those. Written when the
// login completes (beside the grant's IdP tokens); each index is a store log
// whose members are grant ids, kept as long as a grant lives.
import { idpSessionGrantsKey, idpSubjectGrantsKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import type { LogoutClaims } from '../idp/oidc-client.js';

export class IdpSessions {
  constructor(
    private readonly store: Store,
    /** A grant's lifetime (refresh_token_ttl): an index entry never needs to outlive it. */
    private readonly grantTtlMs: number,
  ) {}

  async bind(grantId: string, idpIssuer: string, idpSubject: string, sid: string | undefined): Promise<void> {
    await this.store.appendToLog(idpSubjectGrantsKey(idpIssuer, idpSubject), grantId, this.grantTtlMs);
    if (sid !== undefined) await this.store.appendToLog(idpSessionGrantsKey(idpIssuer, sid), grantId, this.grantTtlMs);
  }

  /** The grants a logout ends: the session's when it names `sid` (OIDC BCL §2.4), else every grant of the user `sub`. */
  async grantsEndedBy(logout: LogoutClaims): Promise<string[]> {
    const key = logout.sid !== undefined ? idpSessionGrantsKey(logout.issuer, logout.sid) : idpSubjectGrantsKey(logout.issuer, logout.sub as string);
    return (await this.store.readLog(key, 0)).map((entry) => entry.member);
  }
}
