// `upstream: { sse: URL }`: a legacy HTTP+SSE route loads with its transport,
// and what is not an http(s) URL or that one form is refused at its line.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/config-error.js';

const GATEWAY = 'listen: { host: 127.0.0.1, port: 9000 }\npublic_url: http://127.0.0.1:9000\nauthorization_server:\n  enabled: true\n';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-config-sse-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(route: string) {
  await writeFile(join(dir, 'gateway.yaml'), GATEWAY);
  await writeFile(join(dir, 'a.yaml'), `path: /a/mcp\n${route}`);
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

describe('upstream: { sse: URL }', () => {
  it('loads as an sse route whose upstream is the SSE URL (also the default audience of upstream credentials)', async () => {
    const config = await load('upstream: { sse: http://127.0.0.1:3001/sse }\nupstream_auth: { kind: signed }\n');
    expect(config.routes[0]).toMatchObject({
      upstream: 'http://127.0.0.1:3001/sse',
      sse: { maxSessions: 1000, maxSessionsPerPrincipal: 4 },
      upstreamAuth: { kind: 'signed', audience: 'http://127.0.0.1:3001/sse' },
    });
  });

  it('keeps a plain URL a Streamable HTTP route', async () => {
    const config = await load('upstream: http://127.0.0.1:3000/mcp\n');
    expect(config.routes[0]?.upstream).toBe('http://127.0.0.1:3000/mcp');
    expect(config.routes[0]?.sse).toBeUndefined();
  });

  it('warns about plain http to a remote SSE server at the sse key', async () => {
    const config = await load('upstream:\n  sse: http://10.0.0.5/sse\n');
    expect(config.warnings.join('\n')).toMatch(/a\.yaml:3:\d+: upstream\.sse: /);
  });

  it.each([
    ['upstream: ftp://127.0.0.1/sse\n', /^a\.yaml:2:11: upstream: expected an http\(s\) URL$/],
    ['upstream: 5\n', /^a\.yaml:2:11: upstream: expected an http\(s\) URL, \{ sse: URL \} \(legacy HTTP\+SSE\) or \{ stdio/],
    ['upstream: { sse: ftp://127.0.0.1/sse }\n', /^a\.yaml:2:\d+: upstream\.sse: expected an http\(s\) URL/],
    ['upstream: { sse: http://127.0.0.1/sse, extra: 1 }\n', /^a\.yaml:2:\d+: upstream\.extra: unknown key/],
    ['upstream: { sse: "http://127.0.0.1/sse#frag" }\n', /^a\.yaml:2:\d+: upstream\.sse: a URL here must not have a fragment/],
  ])('refuses %j at its line', async (route, message) => {
    const errors = await errorsOf(route);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(message);
  });
});

describe("the legacy SSE route of docs/upstreams.md", () => {
  it('loads as shown', async () => {
    const page = await readFile(new URL('../../docs/upstreams.md', import.meta.url), 'utf8');
    const block = /```yaml\n(# policies\/legacy\.yaml[\s\S]*?)```/.exec(page)?.[1];
    expect(block).toBeDefined();
    await writeFile(join(dir, 'gateway.yaml'), GATEWAY);
    await writeFile(join(dir, 'legacy.yaml'), block!);
    const config = await loadConfig(dir, { LEGACY_API_KEY: 'k' });
    expect(config.routes[0]).toMatchObject({ path: '/legacy/mcp', upstream: 'http://127.0.0.1:3001/sse', sse: { maxSessions: 1000, maxSessionsPerPrincipal: 4 }, upstreamAuth: { kind: 'static', header: 'x-api-key', value: 'k' } });
  });
});
