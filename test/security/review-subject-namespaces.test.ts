/**
 * Review (round 3), code read: the principal is (issuer, subject), and three kinds of subject share
 * the built-in AS's one namespace with nothing to tell them apart:
 * - a signed-in user's: any 1–255 printable ASCII characters of the login's subject_claim, `#` included;
 * - an enterprise user's (ID-JAG, another IdP): `<issuer>#<sub>`, "so an enterprise subject never
 *   names a user of another IdP" (jwt-bearer.ts);
 * - a machine client's (client_credentials): the bare client_id.
 * A login subject spelled as either of the other two is the same principal: the same user_oauth
 * grant (upstream-grants.ts keys it by issuer + subject), per-user shares, `allow_subjects`.
 */
import { describe, expect, it } from 'vitest';
import { tokenSubject } from '../../src/authorization-server/grants/jwt-bearer.js';
import { userIdFrom } from '../../src/authorization-server/login/idp-round-trip.js';
import type { AsContext } from '../../src/authorization-server/context.js';

const ctx = { config: { login: { kind: 'oidc', issuer: 'https://login.example', subjectClaim: 'preferred_username' } } } as unknown as Pick<AsContext, 'config'>;

describe('review: subject namespaces of the built-in AS', () => {
  it('a login subject can spell an enterprise (ID-JAG) subject', () => {
    const enterprise = tokenSubject(ctx, { issuer: 'https://enterprise.example', subject: 'alice' });
    const login = userIdFrom({ preferred_username: 'https://enterprise.example#alice' }, 'preferred_username', false);
    expect(login).not.toBe(enterprise);
  });

  it('a login subject can spell a machine client (client_credentials sub is the client_id)', () => {
    // client-credentials.ts: { subject: client.clientId }
    const machine = 'ci-deploy';
    expect(userIdFrom({ preferred_username: 'ci-deploy' }, 'preferred_username', false)).not.toBe(machine);
  });
});
