// Grants (src/authorization-server/tokens/grants.ts) on the memory store and a real
// redis-server: a grant's refresh family starts, rotates once per token, and
// a rotated token presented again revokes the whole grant (its access tokens
// too, through RevokedGrants); every revocation reaches the onRevoke
// listeners, in order, with what the revoker knew; a refresh check refuses
// without using up the token. The member rotated last, presented again by its
// client with the same key within the grace (a lost answer retried), gets a
// fresh rotation instead (test/security/k-as-grants.test.ts holds the [K75] cases).
import { Writable } from 'node:stream';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { Grants, REFRESH_RETRY_GRACE_MS, type GrantInfo, type RevocationReason, type RevokedGrant } from '../../src/authorization-server/tokens/grants.js';
import { RevokedGrants } from '../../src/authorization-server/tokens/revoked-grants.js';
import { createLogger } from '../../src/observability/logger.js';
import { hashSecret } from '../../src/authorization-server/helpers/secrets.js';
import { refreshFamilyKey } from '../../src/store/key-names.js';
import { Metrics } from '../../src/observability/metrics.js';
import { describeOnEachStore } from '../helpers/store-backends.js';

const REFRESH_TTL_MS = 3_600_000;
const quiet = () => createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));

let serial = 0;
function grantInfo(overrides: Partial<GrantInfo> = {}): GrantInfo {
  serial++;
  return { grantId: `grant-${serial}-${Date.now()}`, clientId: 'client-1', subject: 'alice', scopes: ['files:read'], resource: 'https://gw.example/mcp', ...overrides };
}

/** What rotate throws: a 400 invalid_grant, with its description. */
async function refusal(promise: Promise<unknown>): Promise<{ status: number; code: string; description: string }> {
  const err: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(GatewayError);
  const { status, code, description } = err as GatewayError;
  return { status, code, description };
}

describeOnEachStore('Grants', (store) => {
  let revokedGrants: RevokedGrants;
  let grants: Grants;
  let revocations: Array<{ grantId: string; reason: RevocationReason; revoked: RevokedGrant }>;
  /** The grants' clock: a test moves it past the retry grace. */
  let clock = 0;
  const pastTheGrace = () => (clock += REFRESH_RETRY_GRACE_MS + 1);

  beforeEach(async () => {
    revokedGrants = new RevokedGrants({ store: store(), issuer: 'https://as.example', accessTokenTtlMs: 600_000, logger: quiet(), metrics: new Metrics({ defaultMetrics: false }) });
    await revokedGrants.start();
    clock = Date.now();
    grants = new Grants(store(), REFRESH_TTL_MS, revokedGrants, { now: () => clock });
    revocations = [];
    grants.onRevoke((grantId, reason, revoked) => {
      revocations.push({ grantId, reason, revoked });
    });
  });
  afterEach(() => revokedGrants.close());

  it('start: the first refresh token names its grant, which is not revoked', async () => {
    const grant = grantInfo();
    const token = await grants.startFamily(grant);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await grants.lookup(token)).toEqual(grant);
    expect(await grants.isRevoked(grant.grantId)).toBe(false);
    expect(await grants.lookup('never-issued')).toBeUndefined();
  });

  it('rotate: the grant and a new refresh token, which rotates in turn', async () => {
    const grant = grantInfo();
    const first = await grants.startFamily(grant);
    const second = await grants.rotate(first, grant.clientId);
    expect(second.grant).toEqual(grant);
    expect(second.refreshToken).not.toBe(first);
    const third = await grants.rotate(second.refreshToken, grant.clientId);
    expect(third.grant).toEqual(grant);
    expect(revocations).toEqual([]);
  });

  it('reuse: a rotated token presented again revokes the whole grant, its newest token and its access tokens too', async () => {
    const grant = grantInfo();
    const first = await grants.startFamily(grant);
    const { refreshToken: current } = await grants.rotate(first, grant.clientId);
    pastTheGrace();
    expect(await refusal(grants.rotate(first, grant.clientId))).toEqual({ status: 400, code: 'invalid_grant', description: 'The refresh token was already used: the grant is revoked' });
    expect(await grants.isRevoked(grant.grantId)).toBe(true);
    expect(revokedGrants.state(grant.grantId)).toBe('revoked');
    expect(revocations).toEqual([{ grantId: grant.grantId, reason: 'refresh_token_reuse', revoked: { subject: 'alice', clientId: 'client-1' } }]);
    expect(await refusal(grants.rotate(current, grant.clientId))).toMatchObject({ code: 'invalid_grant', description: 'The refresh token is invalid, expired or revoked' });
    expect(revocations).toHaveLength(1);
  });

  it('10 concurrent rotations of one token by its client and key are each answered (retries within the grace): one family member is current, nothing revoked; after the grace an answer not current is reuse', async () => {
    const grant = grantInfo();
    const token = await grants.startFamily(grant);
    const results = await Promise.all(Array.from({ length: 10 }, () => grants.rotate(token, grant.clientId)));
    const issued = results.map((r) => r.refreshToken);
    expect(new Set(issued).size).toBe(10);
    expect(revocations).toEqual([]);
    const family = JSON.parse((await store().get(refreshFamilyKey(grant.grantId)))!) as { current: string };
    const current = issued.filter((t) => hashSecret(t) === family.current);
    expect(current).toHaveLength(1);
    pastTheGrace();
    expect((await grants.rotate(current[0]!, grant.clientId)).grant).toEqual(grant);
    expect(await refusal(grants.rotate(issued.find((t) => t !== current[0])!, grant.clientId))).toMatchObject({ code: 'invalid_grant', description: 'The refresh token was already used: the grant is revoked' });
    expect(await grants.isRevoked(grant.grantId)).toBe(true);
  });

  it('a token presented by another client, or never issued, is invalid_grant and revokes nothing', async () => {
    const grant = grantInfo();
    const token = await grants.startFamily(grant);
    expect(await refusal(grants.rotate(token, 'client-2'))).toEqual({ status: 400, code: 'invalid_grant', description: 'The refresh token is invalid, expired or revoked' });
    expect(await refusal(grants.rotate('never-issued', grant.clientId))).toMatchObject({ code: 'invalid_grant' });
    expect(await grants.isRevoked(grant.grantId)).toBe(false);
    expect(revocations).toEqual([]);
    expect((await grants.rotate(token, grant.clientId)).grant).toEqual(grant);
  });

  it('revoke: the grant is revoked here at once, its refresh token refused, and each listener told in order, with what the revoker knew', async () => {
    const grant = grantInfo();
    const token = await grants.startFamily(grant);
    const order: string[] = [];
    grants.onRevoke(async () => {
      await Promise.resolve();
      order.push('second');
    });
    grants.onRevoke(() => {
      order.push('third');
    });
    await grants.revoke(grant.grantId, 'revoked_by_client', { subject: 'alice', clientId: 'client-1', token: 'access_token' });
    expect(await grants.isRevoked(grant.grantId)).toBe(true);
    expect(revokedGrants.state(grant.grantId)).toBe('revoked');
    expect(revocations).toEqual([{ grantId: grant.grantId, reason: 'revoked_by_client', revoked: { subject: 'alice', clientId: 'client-1', token: 'access_token' } }]);
    expect(order).toEqual(['second', 'third']);
    expect(await refusal(grants.rotate(token, grant.clientId))).toMatchObject({ code: 'invalid_grant', description: 'The refresh token is invalid, expired or revoked' });
  });

  it('revoke without details (a back-channel logout knows only the grant): the listeners get an empty record', async () => {
    const grant = grantInfo();
    await grants.revoke(grant.grantId, 'idp_session_ended');
    expect(revocations).toEqual([{ grantId: grant.grantId, reason: 'idp_session_ended', revoked: {} }]);
    expect(await grants.isRevoked(grant.grantId)).toBe(true);
    expect(await grants.isRevoked(grantInfo().grantId)).toBe(false);
  });

  it('a refresh check that refuses leaves the token usable; a reused token is not checked, just revoked', async () => {
    const grant = grantInfo();
    const token = await grants.startFamily(grant);
    const checked: string[] = [];
    let refuse = true;
    grants.beforeRefresh(async (g) => {
      checked.push(g.grantId);
      if (refuse) throw new GatewayError(503, 'temporarily_unavailable', 'the IdP cannot be reached');
    });
    expect(await refusal(grants.rotate(token, grant.clientId))).toMatchObject({ status: 503, code: 'temporarily_unavailable' });
    expect(await grants.isRevoked(grant.grantId)).toBe(false);
    refuse = false;
    await grants.rotate(token, grant.clientId);
    expect(checked).toEqual([grant.grantId, grant.grantId]);
    pastTheGrace();
    await refusal(grants.rotate(token, grant.clientId));
    expect(checked).toHaveLength(2);
    expect(revocations.map((r) => r.reason)).toEqual(['refresh_token_reuse']);
  });
});
