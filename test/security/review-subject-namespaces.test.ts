/**
 * Review (round 3), code read: the principal is (issuer, subject), and three kinds of subject shared
 * the built-in AS's one namespace with nothing to tell them apart:
 * - a signed-in user's: any 1–255 printable ASCII characters of the login's subject_claim, `#` included;
 * - an enterprise user's (ID-JAG, another IdP): `<issuer>#<sub>`, "so an enterprise subject never
 *   names a user of another IdP" (jwt-bearer.ts);
 * - a machine client's (client_credentials): the bare client_id.
 * A login subject spelled as either of the other two was the same principal: the same user_oauth
 * grant (upstream-grants.ts keys it by issuer + subject), per-user shares, `allow_subjects`. Now a
 * login subject of either shape is no usable user id (the sign-in fails); existing subjects' values
 * are unchanged. Fails while a login subject can spell another namespace's.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { tokenSubject } from '../../src/authorization-server/grants/jwt-bearer.js';
import { machineSubjects, userIdFrom } from '../../src/authorization-server/login/idp-round-trip.js';
import type { AsContext } from '../../src/authorization-server/context.js';
import type { StaticClientConfig } from '../../src/config/types.js';

const ctx = { config: { login: { kind: 'oidc', issuer: 'https://login.example', subjectClaim: 'preferred_username' } } } as unknown as Pick<AsContext, 'config'>;
const client = (clientId: string, grantTypes: StaticClientConfig['grantTypes']): StaticClientConfig => ({ clientId, grantTypes, redirectUris: [] });
const machines = machineSubjects({ clients: [client('ci-deploy', ['client_credentials']), client('web-app', ['authorization_code'])] });

describe('review (LOW): subject namespaces of the built-in AS are disjoint', () => {
  it('a login subject cannot spell an enterprise (ID-JAG) subject', () => {
    const enterprise = tokenSubject(ctx, { issuer: 'https://enterprise.example', subject: 'alice' });
    const login = userIdFrom({ preferred_username: 'https://enterprise.example#alice' }, 'preferred_username', false, machines);
    expect(login).not.toBe(enterprise);
    expect(login).toBeUndefined();
  });

  it('a login subject cannot spell a machine client (client_credentials sub is the client_id); other subjects keep their values', () => {
    expect(userIdFrom({ preferred_username: 'ci-deploy' }, 'preferred_username', false, machines)).toBeUndefined();
    // Only client_credentials clients are machine subjects; `#` without an issuer before it stays a user's.
    expect(userIdFrom({ preferred_username: 'web-app' }, 'preferred_username', false, machines)).toBe('web-app');
    expect(userIdFrom({ preferred_username: 'team#7' }, 'preferred_username', false, machines)).toBe('team#7');
    expect(userIdFrom({ id: 42 }, 'id', true, machines)).toBe('42');
    expect(userIdFrom({ id: 42 }, 'id', true, machineSubjects({ clients: [client('42', ['client_credentials'])] }))).toBeUndefined();
  });

  it('property: no login subject (string or integer) equals an enterprise subject of any issuer or a machine subject; others pass unchanged', () => {
    const printable = fc.stringMatching(/^[\x20-\x7E]{1,40}$/);
    const issuer = fc.webUrl({ withFragments: false, withQueryParameters: false }).filter((u) => !u.includes('#'));
    fc.assert(
      fc.property(issuer, printable, fc.array(printable, { maxLength: 3 }), printable, (iss, sub, clientIds, candidate) => {
        const config = { clients: clientIds.map((id) => client(id, ['client_credentials'])) };
        const reserved = machineSubjects(config);
        const enterprise = tokenSubject(ctx, { issuer: iss, subject: sub });
        for (const spelled of [enterprise, ...clientIds, candidate]) {
          const login = userIdFrom({ u: spelled }, 'u', false, reserved);
          if (login === undefined) continue;
          expect(login).toBe(spelled);
          expect(reserved.has(login)).toBe(false);
          expect(login.startsWith(`${iss}#`)).toBe(false);
        }
        expect(userIdFrom({ u: enterprise }, 'u', false, reserved)).toBeUndefined();
        for (const id of clientIds) expect(userIdFrom({ u: id }, 'u', false, reserved)).toBeUndefined();
      }),
      { numRuns: 300 },
    );
  });
});
