// AuthorizationCodes (src/authorization-server/tokens/codes.ts) on the memory store
// and a real redis-server: a code is issued, peeked without being used up,
// taken exactly once even by concurrent redemptions, remembered as redeemed
// (naming its grant) after the take, and gone after its lifetime.
import { describe, expect, it } from 'vitest';
import { AuthorizationCodes, CODE_TTL_MS, type CodeRecord } from '../../src/authorization-server/tokens/codes.js';
import { describeOnEachStore } from '../helpers/store-backends.js';
import { RFC7636_CHALLENGE } from '../helpers/oauth-requests.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function record(overrides: Partial<CodeRecord> = {}): CodeRecord {
  return {
    clientId: 'client-1',
    redirectUri: 'https://app.example/cb',
    redirectUriSent: true,
    codeChallenge: RFC7636_CHALLENGE,
    resource: 'https://gw.example/mcp',
    scopes: ['files:read'],
    subject: 'alice',
    grantId: `grant-${Math.random()}`,
    authTime: 1_700_000_000,
    ...overrides,
  };
}

describe('AuthorizationCodes', () => {
  it('lives at most 60 s', () => {
    expect(CODE_TTL_MS).toBe(60_000);
  });
});

describeOnEachStore('AuthorizationCodes', (store) => {
  it('issues a 256-bit random code, and peek reads its record without using it up', async () => {
    const codes = new AuthorizationCodes(store());
    const issued = record();
    const code = await codes.issue(issued);
    expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await codes.peek(code)).toEqual(issued);
    expect(await codes.peek(code)).toEqual(issued);
    expect(await codes.take(code)).toEqual(issued);
  });

  it('issues a different code each time, each with its own record', async () => {
    const codes = new AuthorizationCodes(store());
    const [a, b] = [record({ subject: 'alice' }), record({ subject: 'bob' })];
    const [codeA, codeB] = [await codes.issue(a), await codes.issue(b)];
    expect(codeA).not.toBe(codeB);
    expect((await codes.peek(codeA))?.subject).toBe('alice');
    expect((await codes.peek(codeB))?.subject).toBe('bob');
  });

  it('is kept only under a hash of the code: the code itself is no key of the store', async () => {
    const code = await new AuthorizationCodes(store()).issue(record());
    expect(await store().get(code)).toBeUndefined();
  });

  it('an unknown code has no record and no redemption', async () => {
    const codes = new AuthorizationCodes(store());
    expect(await codes.peek('never-issued')).toBeUndefined();
    expect(await codes.take('never-issued')).toBeUndefined();
    expect(await codes.redeemedBy('never-issued')).toBeUndefined();
  });

  it('is taken once: the second take, and a peek after it, find nothing', async () => {
    const codes = new AuthorizationCodes(store());
    const code = await codes.issue(record());
    expect(await codes.take(code)).toBeDefined();
    expect(await codes.take(code)).toBeUndefined();
    expect(await codes.peek(code)).toBeUndefined();
  });

  it('of 20 concurrent takes of one code exactly one gets the record', async () => {
    const codes = new AuthorizationCodes(store());
    const issued = record();
    const code = await codes.issue(issued);
    const results = await Promise.all(Array.from({ length: 20 }, () => codes.take(code)));
    expect(results.filter((r) => r !== undefined)).toEqual([issued]);
  });

  it('a redeemed code names its grant after the record is gone (replay detection), and only that code', async () => {
    const codes = new AuthorizationCodes(store());
    const issued = record();
    const code = await codes.issue(issued);
    const other = await codes.issue(record());
    expect(await codes.redeemedBy(code)).toBeUndefined();
    await codes.markRedeemed(code, issued);
    await codes.take(code);
    expect(await codes.redeemedBy(code)).toEqual({ grantId: issued.grantId, clientId: issued.clientId, codeChallenge: issued.codeChallenge, ...(issued.dpopJkt !== undefined && { dpopJkt: issued.dpopJkt }) });
    expect(await codes.redeemedBy(other)).toBeUndefined();
  });

  it('expires after its lifetime: peek and take find nothing', async () => {
    const codes = new AuthorizationCodes(store(), 80);
    const code = await codes.issue(record());
    expect(await codes.peek(code)).toBeDefined();
    await sleep(200);
    expect(await codes.peek(code)).toBeUndefined();
    expect(await codes.take(code)).toBeUndefined();
  });

  it('the redemption marker outlives the code', async () => {
    const codes = new AuthorizationCodes(store(), 80);
    const issued = record();
    const code = await codes.issue(issued);
    await codes.markRedeemed(code, issued);
    await sleep(200);
    expect(await codes.peek(code)).toBeUndefined();
    expect(await codes.redeemedBy(code)).toEqual({ grantId: issued.grantId, clientId: issued.clientId, codeChallenge: issued.codeChallenge, ...(issued.dpopJkt !== undefined && { dpopJkt: issued.dpopJkt }) });
  });
});
