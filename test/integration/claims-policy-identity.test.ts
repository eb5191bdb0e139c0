/**
 * Through the real gateway (in-process, a recording upstream, signed JWTs):
 * `match: { when }` rules decide on the token's claims and the call's
 * arguments, and `identity_headers` reach the upstream from the verified token
 * only — the client's own copies of those names removed in any spelling, an
 * absent claim sending none, a value that cannot be a header refused (403,
 * nothing forwarded) rather than mangled.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startJwtStage, stopJwtStage, type JwtStage } from '../helpers/jwt-gateway.js';
import { gatewayYaml, jwtRoute, resourceOf } from '../helpers/security-fixtures.js';
import { MCP_HEADERS } from './policy-harness.js';

let stage: JwtStage;
const ROUTE = '/team/mcp';

beforeAll(async () => {
  stage = await startJwtStage(({ issuer, up }) => ({
    'gateway.yaml': gatewayYaml(),
    'team.yaml': jwtRoute(ROUTE, `${up.origin}/mcp`, issuer, {
      identity_headers: { 'X-Forwarded-User': 'sub', 'X-Forwarded-Email': 'claims.email', 'X-Forwarded-Groups': 'claims.groups', 'X-Team': 'claims.org.team' },
      rules: [
        { match: { method: 'tools/call', tool: 'delete_*', when: '!("admins" in claims.groups)' }, deny: true },
        { match: { method: 'tools/call', tool: 'create_issue', when: 'arguments.owner != "acme"' }, deny: true },
        { match: { method: 'tools/call', when: '!claims.email.endsWith("@acme.example")' }, deny: true },
      ],
    }),
  }));
}, 60_000);

afterAll(async () => {
  await stopJwtStage(stage ?? {});
});

async function callTool(claims: Record<string, unknown>, name: string, args: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  const token = await stage.issuer.mint({ aud: resourceOf(ROUTE), ...claims });
  const before = stage.up.requests.length;
  const res = await fetch(`${stage.gw.url}${ROUTE}`, {
    method: 'POST',
    headers: { ...MCP_HEADERS, ...headers, authorization: `Bearer ${token}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
  });
  await res.arrayBuffer();
  const forwarded = stage.up.requests.slice(before);
  const header = (n: string) => forwarded[0]?.headers.filter(([k]) => k.toLowerCase() === n).map(([, v]) => v);
  return { status: res.status, forwarded: forwarded.length, header };
}

const ADMIN = { sub: 'alice', email: 'alice@acme.example', groups: ['admins', 'dev'], org: { team: 'platform' } };

describe('when: claims and arguments through the gateway', () => {
  it('groups decide delete_*, the owner argument decides create_issue, the email domain everything', async () => {
    expect(await callTool(ADMIN, 'delete_repo')).toMatchObject({ status: 200, forwarded: 1 });
    expect(await callTool({ ...ADMIN, groups: ['dev'] }, 'delete_repo')).toMatchObject({ status: 403, forwarded: 0 });
    expect(await callTool(ADMIN, 'create_issue', { owner: 'acme' })).toMatchObject({ status: 200 });
    expect(await callTool(ADMIN, 'create_issue', { owner: 'mallory' })).toMatchObject({ status: 403, forwarded: 0 });
    expect(await callTool({ ...ADMIN, email: 'alice@acme.example.evil' }, 'echo')).toMatchObject({ status: 403, forwarded: 0 });
  });

  it('a token without the claim a deny rule reads is refused, not let through', async () => {
    const { groups: _g, ...noGroups } = ADMIN;
    expect(await callTool(noGroups, 'delete_repo')).toMatchObject({ status: 403, forwarded: 0 });
  });
});

describe('identity_headers: from the verified token only', () => {
  it('sends sub, email, groups (joined by commas) and a nested claim', async () => {
    const { status, header } = await callTool(ADMIN, 'echo');
    expect(status).toBe(200);
    expect(header('x-forwarded-user')).toEqual(['alice']);
    expect(header('x-forwarded-email')).toEqual(['alice@acme.example']);
    expect(header('x-forwarded-groups')).toEqual(['admins,dev']);
    expect(header('x-team')).toEqual(['platform']);
  });

  it('removes the client’s copies in any spelling, even when the token has no such claim', async () => {
    const { org: _o, ...noTeam } = ADMIN;
    const spoof = { 'x-team': 'finance', 'X-TEAM': 'finance2', 'X-Forwarded-User': 'root', 'x-forwarded-groups': 'admins' };
    const { status, header } = await callTool(noTeam, 'echo', {}, spoof);
    expect(status).toBe(200);
    expect(header('x-team')).toEqual([]);
    expect(header('x-forwarded-user')).toEqual(['alice']);
    expect(header('x-forwarded-groups')).toEqual(['admins,dev']);
  });

  it('property: a claim that cannot be a header value is refused (403, nothing forwarded), never mangled', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.tuple(fc.string({ maxLength: 5 }), fc.constantFrom('\r\n', '\n', '\0', '\x7f', 'é', '\u2028', '😀'), fc.string({ maxLength: 5 })).map(([a, b, c]) => `${a}x${b}${c}`),
          fc.constantFrom(' leading', 'trailing ', { nested: 'object' } as unknown as string),
        ),
        async (bad) => {
          // org.team is read by X-Team alone (no rule reads it): the 403 is the header's.
          const result = await callTool({ ...ADMIN, org: { team: bad } }, 'echo');
          expect(result).toMatchObject({ status: 403, forwarded: 0 });
        },
      ),
      { numRuns: 15 },
    );
    expect(await callTool({ ...ADMIN, groups: ['admins', 'a,b'] }, 'echo')).toMatchObject({ status: 403, forwarded: 0 });
    // The same request with a printable team passes: the refusals above are the values', nothing else.
    expect(await callTool({ ...ADMIN, org: { team: 'plat form' } }, 'echo')).toMatchObject({ status: 200, forwarded: 1 });
  });
});
