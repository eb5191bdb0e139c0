// `upstreams:` (DESIGN §8.2): an aggregated route loads with each entry's own
// transport, credential and timeout; `check` refuses both upstream and
// upstreams, an empty set, a name the pattern cannot carry and two shown names
// that can collide, each at its file:line. A property holds the collision check
// to its promise: whatever loads, every shown name leads back to one upstream.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/config-error.js';
import { ShownNames } from '../../src/config/shown-names.js';
import type { AggregateConfig } from '../../src/config/types.js';

const GATEWAY = 'listen: { host: 127.0.0.1, port: 9000 }\npublic_url: http://127.0.0.1:9000\nauthorization_server:\n  enabled: true\n';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-config-upstreams-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(route: string) {
  await writeFile(join(dir, 'gateway.yaml'), GATEWAY);
  await writeFile(join(dir, 'a.yaml'), `path: /all/mcp\n${route}`);
  return loadConfig(dir, {});
}

async function errorsOf(route: string): Promise<string[]> {
  const err = await load(route).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).message.split('\n').map((line) => line.replace(`${dir}/`, ''));
}

const THREE = `upstreams:
  github:
    upstream: http://127.0.0.1:3000/mcp
    upstream_auth: { kind: signed }
    limits: { upstream_timeout: 5s }
  memory:
    upstream: { stdio: { command: npx, args: [-y, "@modelcontextprotocol/server-memory"] } }
    rename: { read_graph: graph }
  docs:
    upstream: { sse: http://127.0.0.1:3001/sse }
`;

describe('upstreams: one route in front of several servers', () => {
  it('loads each entry with its own transport, credential and timeout, in configuration order', async () => {
    const config = await load(THREE);
    const route = config.routes[0]!;
    expect(route.aggregate?.pattern).toBe('{upstream}__{name}');
    expect(route.aggregate?.upstreams.map((u) => u.name)).toEqual(['github', 'memory', 'docs']);
    expect(route.aggregate?.upstreams[0]).toMatchObject({ upstream: 'http://127.0.0.1:3000/mcp', upstreamAuth: { kind: 'signed', audience: 'http://127.0.0.1:3000/mcp' }, upstreamTimeoutMs: 5000 });
    expect(route.aggregate?.upstreams[1]).toMatchObject({ upstream: 'stdio:npx', stdio: { command: 'npx' }, upstreamAuth: { kind: 'none' }, upstreamTimeoutMs: 60_000, renames: { read_graph: 'graph' } });
    expect(route.aggregate?.upstreams[2]).toMatchObject({ upstream: 'http://127.0.0.1:3001/sse', sse: { maxSessions: 1000 } });
    expect(route.upstreamAuth).toEqual({ kind: 'none' });
    const names = new ShownNames(route.aggregate!);
    expect(names.shown('github', 'search')).toBe('github__search');
    expect(names.shown('memory', 'read_graph')).toBe('graph');
    expect(names.owner('graph')).toEqual({ upstream: 'memory', name: 'read_graph' });
    expect(names.owner('memory__read_graph')).toBeUndefined();
    expect(names.owner('docs__a__b')).toEqual({ upstream: 'docs', name: 'a__b' });
    expect(names.owner('nobody__x')).toBeUndefined();
  });

  it.each([
    ['upstream: http://127.0.0.1:3000/mcp\n' + THREE, /^a\.yaml:\d+:\d+: upstreams: a route has either upstream or upstreams, not both$/],
    ['upstreams: {}\n', /^a\.yaml:2:\d+: upstreams: an aggregated route needs at least one upstream$/],
    ['rules: []\n', /^a\.yaml:\d+:\d+: upstream: required, but missing$/],
    ['upstreams:\n  "git hub": { upstream: http://127.0.0.1:3000/mcp }\n', /^a\.yaml:3:\d+: upstreams\.git hub: the upstream name "git hub" cannot be carried in a tool name/],
    ['names: "{name}"\nupstreams:\n  a: { upstream: http://127.0.0.1:3000/mcp }\n', /^a\.yaml:2:\d+: names: "\{name\}" must hold \{upstream\} and \{name\} exactly once each$/],
    ['names: "{upstream}/{name}"\nupstreams:\n  a: { upstream: http://127.0.0.1:3000/mcp }\n', /^a\.yaml:2:\d+: names: .* cannot be carried in a tool name/],
    ['names: "{upstream}_{name}"\nupstreams:\n  a: { upstream: http://127.0.0.1:3000/mcp }\n  a_b: { upstream: http://127.0.0.1:3001/mcp }\n', /^a\.yaml:5:\d+: upstreams\.a_b: shown names of a_b and a can collide/],
    ['upstreams:\n  a: { upstream: http://127.0.0.1:3000/mcp, rename: { x: b__y } }\n  b: { upstream: http://127.0.0.1:3001/mcp }\n', /^a\.yaml:3:\d+: upstreams\.a\.rename\.x: b__y collides with the names/],
    ['upstreams:\n  a: { upstream: http://127.0.0.1:3000/mcp, rename: { x: z } }\n  b: { upstream: http://127.0.0.1:3001/mcp, rename: { y: z } }\n', /^a\.yaml:4:\d+: upstreams\.b\.rename\.y: z is already the shown name of a's x$/],
    ['upstreams:\n  a: { upstream: { stdio: { command: x } }, upstream_auth: { kind: signed } }\n', /^a\.yaml:3:\d+: upstreams\.a\.upstream_auth\.kind: a stdio upstream takes upstream_auth kind none/],
    ['upstream_auth: { kind: signed }\nupstreams:\n  a: { upstream: http://127.0.0.1:3000/mcp }\n', /^a\.yaml:2:\d+: upstream_auth: an aggregated route takes upstream_auth in each of its upstreams$/],
    ['rules:\n  - { match: { upstream: gh }, deny: true }\nupstreams:\n  github: { upstream: http://127.0.0.1:3000/mcp }\n', /^a\.yaml:3:\d+: rules\[0\]\.match\.upstream: gh is not one of this route's upstreams \(github\)$/],
    ['upstream: http://127.0.0.1:3000/mcp\nrate_limits:\n  - { per: principal, match: { upstream: gh }, requests: 1, window: 1s }\n', /^a\.yaml:4:\d+: rate_limits\[0\]\.match\.upstream: match.upstream applies only to a route with upstreams$/],
    ['upstreams:\n  gh: { upstream: http://127.0.0.1:3000/mcp, upstream_auth: { kind: user_oauth } }\n', /^a\.yaml:3:\d+: upstreams\.gh\.upstream_auth\.kind: user_oauth needs the built-in authorization server/],
    ['names: "{name}-{upstream}"\nupstream: http://127.0.0.1:3000/mcp\n', /^a\.yaml:2:\d+: names: names applies only to a route with upstreams$/],
  ])('refuses %j at its line', async (route, expected) => {
    const errors = await errorsOf(route);
    expect(errors.some((line) => expected.test(line)), errors.join('\n')).toBe(true);
  });

  it('property: whenever a set of upstream names and renames loads, every shown name leads back to its own upstream and name', async () => {
    const upstreamName = fc.stringMatching(/^[a-c_]{1,3}$/);
    const toolName = fc.stringMatching(/^[a-c_]{1,4}$/);
    const pattern = fc.constantFrom('{upstream}__{name}', '{upstream}_{name}', '{name}.{upstream}', 'x{upstream}{name}');
    await fc.assert(
      fc.asyncProperty(pattern, fc.uniqueArray(upstreamName, { minLength: 1, maxLength: 3 }), fc.array(fc.tuple(toolName, toolName), { maxLength: 2 }), async (names, ups, renames) => {
        const entries = ups.map((u, i) => `  ${JSON.stringify(u)}:\n    upstream: http://127.0.0.1:${3000 + i}/mcp\n` + (i === 0 && renames.length ? `    rename: ${JSON.stringify(Object.fromEntries(renames))}\n` : '')).join('');
        const loaded = await load(`names: ${JSON.stringify(names)}\nupstreams:\n${entries}`).catch((e: unknown) => {
          if (e instanceof ConfigError) return undefined;
          throw e;
        });
        if (!loaded) return;
        const aggregate: AggregateConfig = loaded.routes[0]!.aggregate!;
        const shownNames = new ShownNames(aggregate);
        const seen = new Map<string, string>();
        for (const u of aggregate.upstreams) {
          for (const tool of ['a', 'b', 'c', '_', 'a_', '_b', 'ab_c', ...renames.map(([own]) => own)]) {
            const shown = shownNames.shown(u.name, tool);
            const owner = `${u.name}/${tool}`;
            expect(seen.get(shown) ?? owner, `${shown} shown for two names`).toBe(owner);
            seen.set(shown, owner);
            expect(shownNames.owner(shown)).toEqual({ upstream: u.name, name: tool });
          }
        }
      }),
      { numRuns: 150 },
    );
  });
});
