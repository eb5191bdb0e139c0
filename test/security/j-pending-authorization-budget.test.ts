/**
 * J54 (issue 26, DESIGN.md §8.3 "no principal can take what all share"): the budget of pending
 * authorizations across all addresses is spent only when one is written, once the request is
 * validated, and each client address has its own share of it (a fiftieth). Garbage from many
 * addresses, to /authorize or any other AS endpoint, spends none of it: a new user's sign-in from a
 * fresh address still works (on main: 429 with a Retry-After of minutes).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PENDING_AUTHORIZATION_CLASS } from '../../src/store/key-names.js';
import { startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { codeRequestUrl, newVerifier, registerPublicClient, type PublicClient } from '../helpers/oauth-requests.js';

/** Its share per address: 200 / 50 = 4. */
const BUDGET = 200;
const SHARE = 4;

/** A distinct IPv4 address per call, from a range no other test file uses. */
let next = 0;
const newAddress = () => {
  next++;
  return `100.${64 + ((next >> 16) & 63)}.${(next >> 8) & 255}.${next & 255}`;
};

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const JSON_TYPE = { 'content-type': 'application/json' };

/** Requests every AS endpoint refuses (4xx, never 429 from a shared budget); `client` makes some of them look almost valid. */
const garbageRequests = (issuer: string, client: PublicClient, resource: string): Array<{ url: string; init: RequestInit }> => [
  { url: `${issuer}/authorize?x=1`, init: {} },
  { url: `${issuer}/authorize?client_id=nobody&response_type=code`, init: {} },
  // A registered client with a redirect URI it never registered: an error page, nothing stored.
  { url: codeRequestUrl(issuer, { client: { ...client, redirectUri: 'http://127.0.0.1:1/evil' }, verifier: newVerifier(), state: 's', resource }).href, init: {} },
  // No PKCE challenge.
  { url: `${issuer}/authorize?response_type=code&client_id=${encodeURIComponent(client.id)}&redirect_uri=${encodeURIComponent(client.redirectUri)}&resource=${encodeURIComponent(resource)}`, init: {} },
  { url: `${issuer}/authorize`, init: { method: 'POST', headers: FORM, body: 'client_id=nobody&response_type=code' } },
  { url: `${issuer}/authorize/consent`, init: { method: 'POST', headers: FORM, body: 'interaction=x&csrf=y&decision=approve' } },
  { url: `${issuer}/authorize/login/dev`, init: { method: 'POST', headers: FORM, body: 'interaction=x&username=eve' } },
  { url: `${issuer}/register`, init: { method: 'POST', headers: JSON_TYPE, body: '{}' } },
  { url: `${issuer}/token`, init: { method: 'POST', headers: FORM, body: 'grant_type=authorization_code&code=x&client_id=nobody' } },
  { url: `${issuer}/revoke`, init: { method: 'POST', headers: FORM, body: 'token=x&client_id=nobody' } },
];

async function send(url: string, init: RequestInit, address: string): Promise<{ status: number; retryAfter: string | null }> {
  const res = await fetch(url, { ...init, headers: { ...(init.headers as Record<string, string>), 'x-forwarded-for': address }, redirect: 'manual' });
  await res.text();
  return { status: res.status, retryAfter: res.headers.get('retry-after') };
}

describe('[J54] pending authorizations: garbage from many addresses spends no shared budget (issue 26)', () => {
  let gateway: AsGateway;
  let client: PublicClient;
  let resource: string;
  const validRequest = () => codeRequestUrl(gateway.issuer, { client, verifier: newVerifier(), state: 's', resource, scope: 'mcp:read' }).href;
  const pendingWrites = () => gateway.recording.writes.filter((w) => w.key.startsWith(`${PENDING_AUTHORIZATION_CLASS}:`)).length;

  beforeAll(async () => {
    gateway = await startAsGateway({
      upstream: 'http://127.0.0.1:9/mcp',
      gateway: { trust_proxy: true },
      authorizationServer: { rate_limits: { pending_authorizations: { requests: BUDGET, window: '1h' } } },
    });
    client = await registerPublicClient(gateway.issuer, 'budget-test');
    resource = `${gateway.issuer}/everything/mcp`;
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('[J54] 70 addresses send garbage /authorize (more than the whole budget): a new user from a fresh address still signs in', async () => {
    const writesBefore = pendingWrites();
    const statuses: Record<number, number> = {};
    await Promise.all(
      Array.from({ length: 70 }, async () => {
        const address = newAddress();
        for (let i = 0; i < 5; i++) {
          const { status } = await send(`${gateway.issuer}/authorize?x=${i}`, {}, address);
          statuses[status] = (statuses[status] ?? 0) + 1;
        }
      }),
    );
    expect(statuses).toEqual({ 400: 350 });
    expect(pendingWrites()).toBe(writesBefore);
    // The review's new user: a valid request from an address never seen gets the consent page.
    const user = await send(validRequest(), {}, newAddress());
    expect(user.status).toBe(200);
    expect(pendingWrites()).toBe(writesBefore + 1);
  });

  it('[J54] valid requests: an address past its share gets 429 with Retry-After, alone; nothing is written for it', async () => {
    const flooder = newAddress();
    for (let i = 0; i < SHARE; i++) expect((await send(validRequest(), {}, flooder)).status).toBe(200);
    const writesBefore = pendingWrites();
    for (let i = 0; i < 3; i++) {
      const refused = await send(validRequest(), {}, flooder);
      expect(refused.status).toBe(429);
      expect(Number(refused.retryAfter)).toBeGreaterThan(0);
    }
    expect(pendingWrites()).toBe(writesBefore);
    expect((await send(validRequest(), {}, newAddress())).status).toBe(200);
  });

  it('[J54] property: over any mix of garbage (every AS endpoint) and valid /authorize from many addresses, a valid request under its address\'s share is never refused, and one past it always is', async () => {
    const garbage = garbageRequests(gateway.issuer, client, resource);
    // Valid requests over all runs stay under the budget of all (at most 20 runs × 24 < 200 minus the tests above).
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ from: fc.nat({ max: 5 }), valid: fc.boolean(), garbage: fc.nat({ max: garbage.length - 1 }) }), { minLength: 1, maxLength: 24 }),
        async (actions) => {
          // Fresh addresses per run: each one's share starts whole.
          const addresses = Array.from({ length: 6 }, newAddress);
          const used = new Array<number>(addresses.length).fill(0);
          for (const action of actions) {
            const address = addresses[action.from]!;
            if (!action.valid) {
              const g = garbage[action.garbage]!;
              const { status } = await send(g.url, g.init, address);
              expect(status >= 400 && status < 500 && status !== 429, `${g.url}: ${status}`).toBe(true);
              continue;
            }
            used[action.from]!++;
            const { status } = await send(validRequest(), {}, address);
            expect(status).toBe(used[action.from]! <= SHARE ? 200 : 429);
          }
        },
      ),
      { numRuns: 20 },
    );
  });
});

describe('[J54] pending authorizations: the budget of all addresses still bounds what many addresses write', () => {
  let gateway: AsGateway;
  beforeAll(async () => {
    gateway = await startAsGateway({
      upstream: 'http://127.0.0.1:9/mcp',
      gateway: { trust_proxy: true },
      authorizationServer: { rate_limits: { pending_authorizations: { requests: 100, window: '1h' } } },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('[J54] 50 addresses at their share (2 each) fill a budget of 100: the next valid request gets 429, garbage still its own 400', async () => {
    const client = await registerPublicClient(gateway.issuer, 'fill');
    const resource = `${gateway.issuer}/everything/mcp`;
    const valid = () => codeRequestUrl(gateway.issuer, { client, verifier: newVerifier(), state: 's', resource, scope: 'mcp:read' }).href;
    const answers = await Promise.all(Array.from({ length: 50 }, async () => {
      const address = newAddress();
      return [(await send(valid(), {}, address)).status, (await send(valid(), {}, address)).status];
    }));
    expect(answers.flat()).toEqual(new Array(100).fill(200));
    expect((await send(valid(), {}, newAddress())).status).toBe(429);
    expect((await send(`${gateway.issuer}/authorize?x=1`, {}, newAddress())).status).toBe(400);
  });
});

describe('[J54] pending authorizations: the connected-apps page spends the budget only when it starts a sign-in', () => {
  let gateway: AsGateway;
  beforeAll(async () => {
    gateway = await startAsGateway({
      upstream: 'http://127.0.0.1:9/mcp',
      gateway: { trust_proxy: true, account: { enabled: true } },
      // Its share per address: 1.
      authorizationServer: { rate_limits: { pending_authorizations: { requests: 50, window: '1h' } } },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('[J54] forged account posts spend nothing; a signed-out visit starts a sign-in against the address\'s share, the next one is 429 for that address alone', async () => {
    const address = newAddress();
    for (let i = 0; i < 10; i++) {
      const forged = await send(`${gateway.issuer}/account/apps/revoke`, { method: 'POST', headers: FORM, body: 'client_id=x&csrf=y' }, address);
      expect(forged.status).toBeGreaterThanOrEqual(400);
      expect(forged.status).not.toBe(429);
    }
    const visit = await send(`${gateway.issuer}/account/apps`, {}, address);
    expect(visit.status).toBe(200); // the dev login's form
    expect((await send(`${gateway.issuer}/account/apps`, {}, address)).status).toBe(429);
    expect((await send(`${gateway.issuer}/account/apps`, {}, newAddress())).status).toBe(200);
  });
});
