// `jwks:` in gateway.yaml (config/jwks-settings.ts): how long an external issuer's key set is
// used before it is fetched again, and how long one fetch may take. Defaults 10 min and 5 s;
// bounds 1 min–24 h and 100 ms–60 s, anything else refused at load with the file:line of the
// value; a key set given them gives up a fetch that does not answer after fetch_timeout, not after
// the default 5 s (services.ts builds the gateway's key sets from them).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { JwksRegistry, JwksUnavailable } from '../../src/auth/jwks.js';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load.js';

async function load(jwks?: string) {
  const dir = await mkdtemp(join(tmpdir(), 'mag-jwks-'));
  await writeFile(join(dir, 'gateway.yaml'), `public_url: https://mcp.example.test\n${jwks === undefined ? '' : `jwks:\n${jwks}`}`);
  return loadConfig(join(dir, 'gateway.yaml'), {});
}

async function refusal(jwks: string): Promise<string> {
  const err = await load(jwks).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).message;
}

let server: Server | undefined;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
  server = undefined;
});

describe('jwks: the key sets of external issuers', () => {
  it('defaults to 10 min and 5 s; configured values are used', async () => {
    expect((await load()).jwks).toEqual({ cacheMaxAgeMs: 600_000, fetchTimeoutMs: 5_000 });
    expect((await load('  cache_max_age: 1h\n  fetch_timeout: 750ms\n')).jwks).toEqual({ cacheMaxAgeMs: 3_600_000, fetchTimeoutMs: 750 });
    expect((await load('  fetch_timeout: 60s\n')).jwks).toEqual({ cacheMaxAgeMs: 600_000, fetchTimeoutMs: 60_000 });
  });

  it.each([
    ['cache_max_age: 59s', 'cache_max_age', /from 1m to 24h/],
    ['cache_max_age: 25h', 'cache_max_age', /from 1m to 24h/],
    ['cache_max_age: 1d', 'cache_max_age', /expected a duration such as 10m/],
    ['fetch_timeout: 99ms', 'fetch_timeout', /from 100ms to 60s/],
    ['fetch_timeout: 2m', 'fetch_timeout', /from 100ms to 60s/],
    ['fetch_timeout: 0s', 'fetch_timeout', /expected a duration such as 5s/],
    ['fetch_timeout: 5', 'fetch_timeout', /expected string, received number/],
    ['refresh: 5m', 'refresh', /refresh/],
  ])('%s is refused at load, at its file:line', async (line, key, reason) => {
    const message = await refusal(`  ${line}\n`);
    expect(message).toMatch(new RegExp(`gateway\\.yaml:3:\\d+: .*${key}`));
    expect(message).toMatch(reason);
  });

  it('a key set that does not answer is given up after fetch_timeout (503 for the token), not the default 5 s', async () => {
    // A JWKS endpoint that takes the request and never answers.
    server = createServer(() => undefined);
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const { jwks } = await load('  fetch_timeout: 300ms\n');
    const keys = new JwksRegistry({ cacheMaxAgeMs: jwks!.cacheMaxAgeMs, timeoutMs: jwks!.fetchTimeoutMs }).get('https://idp.example.test', `http://127.0.0.1:${port}/jwks`);
    const failed = await Promise.resolve()
      .then(() => keys({ alg: 'ES256', kid: 'k' }, { payload: '', signature: '', protected: '' }))
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(failed).toBeInstanceOf(JwksUnavailable);
  }, 4_000);
});
