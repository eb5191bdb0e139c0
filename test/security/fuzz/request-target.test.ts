/**
 * [C12] [H37] Property tests of request-target checking (src/proxy/request-target.ts): a path the
 * gateway accepts is read the same way by every parser (WHATWG URL, POSIX normalisation, percent
 * decoding) — it is a fixed point of normalisation, so the path authorised is the path routed. And
 * through a real gateway: only the exact route path reaches the upstream, at its configured path.
 */
import { posix } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { GatewayError } from '../../../src/errors/gateway-error.js';
import { parseRequestTarget } from '../../../src/proxy/request-target.js';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { buildRequest, rawRequest } from '../../helpers/raw-http.js';
import { gatewayYaml, jwtRoute, resourceOf, startRecordingUpstream, startTestIssuer, type RecordingUpstream, type TestIssuer } from '../../helpers/security-fixtures.js';
import { fuzz } from './harness.js';

/** Segment spellings that some parser reads differently from another. */
const trickySegment = fc.constantFrom(
  'mcp', 'a', 'MCP', '.', '..', '%2e', '%2E', '%2e%2e', '.%2e', '%2e.', '%2f', '%2F', '%5c', '%5C', '\\', ';', ';x', '%3b', '%00', '%0a', '%0d%0a', '%7f',
  '', ' ', '%20', '%25', '%252e', '%252f', 'é', '%c3%a9', '%C0%AF', '%e2%80%ae', '~', '!', '$', "'", '(', ')', '*', '+', ',', '=', ':', '@', '&', '%41', '%7e',
  '%u002e', '%', '%zz', '%2', '..;', '.;', 'mcp;jsessionid=x', '#', '?', '[', ']', '|', '{', '}', '^', '`', '"', '<', '>', '\t',
);
const segment = fc.oneof(trickySegment, fc.string({ maxLength: 6 }), fc.stringMatching(/^[A-Za-z0-9._~-]{1,8}$/));
const target = fc.oneof(
  fc.tuple(fc.array(segment, { minLength: 1, maxLength: 6 }), fc.constantFrom('/', '', '//', '\\', 'http://x', '*')).map(([parts, lead]) => `${lead}${parts.join('/')}`),
  fc.tuple(fc.array(segment, { maxLength: 6 }), fc.string({ maxLength: 10 })).map(([parts, q]) => `/${parts.join('/')}?${q}`),
);

/** Percent-decodes to bytes (never throws, unlike decodeURIComponent on invalid UTF-8). */
const decodeBytes = (s: string) => Buffer.from(s.replace(/%([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16))), 'latin1').toString('latin1');

describe('[C12] [H37] accepted request paths are fixed points', () => {
  fuzz(
    'request target: accepted paths are fixed points of every normalisation',
    () =>
      fc.property(target, (raw) => {
        let parsed: { path: string; search: string };
        try {
          parsed = parseRequestTarget(raw);
        } catch (err) {
          expect(err).toBeInstanceOf(GatewayError);
          expect((err as GatewayError).status).toBe(400);
          return;
        }
        const { path, search } = parsed;
        expect(path + search).toBe(raw);
        // WHATWG URL (what Hono, undici and browsers use) changes nothing.
        expect(new URL(path, 'http://gateway.test').pathname).toBe(path);
        // POSIX normalisation (what a file-serving upstream does) changes nothing.
        expect(posix.normalize(path)).toBe(path);
        // Decoding the escapes adds no separator, dot segment or control byte: the segments stay the segments.
        const raws = path.split('/');
        const decoded = raws.map(decodeBytes);
        for (const seg of decoded) {
          expect(seg).not.toMatch(/[/\\]|[^\x20-\x7E\x80-\xFF]/);
          expect(seg === '.' || seg === '..').toBe(false);
        }
        // No path parameters, no fragment.
        expect(path).not.toMatch(/[;#]/);
        expect(search).not.toContain('#');
      }),
    { numRuns: 3000 },
  );
});

describe('[C12] [H37] through a real gateway', () => {
  const ROUTE = '/team/mcp';
  let issuer: TestIssuer;
  let upstream: RecordingUpstream;
  let gateway: TestGateway;
  let token: string;

  beforeAll(async () => {
    [issuer, upstream] = await Promise.all([startTestIssuer(), startRecordingUpstream()]);
    gateway = await startTestGateway({ 'gateway.yaml': gatewayYaml({ log_level: 'warn' }), 'team.yaml': jwtRoute(ROUTE, `${upstream.origin}/mcp?fixed=1`, issuer) });
    token = await issuer.mint({ aud: resourceOf(ROUTE) });
  });
  afterAll(async () => {
    await gateway?.stop();
    await Promise.all([issuer?.close(), upstream?.close()]);
  });

  /** Targets around the route: its segments mangled with the tricky spellings. */
  const aroundRoute = fc.oneof(
    fc.tuple(fc.array(fc.oneof(fc.constantFrom('team', 'mcp', 'TEAM', 'Mcp'), trickySegment), { minLength: 1, maxLength: 4 }), fc.constantFrom('', '?x=1', '?access', '#f')).map(([parts, q]) => `/${parts.join('/')}${q}`),
    fc.tuple(fc.nat(ROUTE.length), trickySegment).map(([at, insert]) => `${ROUTE.slice(0, at)}${insert}${ROUTE.slice(at)}`),
    fc.constantFrom(ROUTE, `${ROUTE}?q=1`),
  );

  fuzz(
    'request target: through the gateway, only the exact route path reaches the upstream, and at its configured path',
    () =>
      fc.asyncProperty(aroundRoute.filter((t) => !/\s|[^\x20-\x7E\x80-\uFFFF]/.test(t)), async (raw) => {
        const before = upstream.requests.length;
        const res = await rawRequest(
          gateway.port,
          buildRequest({ method: 'POST', target: raw, host: 'mcp.example.test', headers: [['Authorization', `Bearer ${token}`]], body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' }),
        );
        const forwarded = upstream.requests.slice(before);
        const exact = raw.split('?')[0] === ROUTE;
        if (!exact) {
          expect(forwarded, `${raw} reached the upstream`).toEqual([]);
          expect([400, 404, 405]).toContain(res.status);
          return;
        }
        expect(res.status).toBe(200);
        expect(forwarded.map((r) => r.url)).toEqual(['/mcp?fixed=1']);
      }),
    { numRuns: 150, longScale: 0.05 },
  );
});
