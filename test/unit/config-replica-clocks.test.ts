// store.max_clock_skew (config/replica-clocks.ts), [K85]: how far apart replicas' clocks may be,
// and so how long a DPoP replay marker outlives the proof's window. Default 30 s; from 1 s to 5 min;
// anything else (negative, zero, a fraction of a second, an hour, not a duration) refused at load
// with the file:line of the value.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PROOF_WINDOW_SECONDS, proofJtiTtlMs } from '../../src/auth/dpop-proof.js';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load.js';
import { DEFAULT_MAX_CLOCK_SKEW_MS, maxClockSkewMs } from '../../src/config/replica-clocks.js';

async function load(store: string) {
  const dir = await mkdtemp(join(tmpdir(), 'mag-skew-'));
  await writeFile(join(dir, 'gateway.yaml'), `public_url: https://mcp.example.test\nstore:\n${store}`);
  return loadConfig(join(dir, 'gateway.yaml'), {});
}

const redis = (skew?: string) => `  kind: redis\n  url: redis://127.0.0.1:6379\n${skew === undefined ? '' : `  max_clock_skew: ${skew}\n`}`;

async function refusal(store: string): Promise<string> {
  const err = await load(store).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).message;
}

describe('[K85] store.max_clock_skew', () => {
  it('[K85] defaults to 30 s on Redis, and the memory store (one replica) keeps the default', async () => {
    expect(maxClockSkewMs((await load(redis())).store)).toBe(30_000);
    expect(maxClockSkewMs((await load('  kind: memory\n')).store)).toBe(DEFAULT_MAX_CLOCK_SKEW_MS);
    expect(DEFAULT_MAX_CLOCK_SKEW_MS).toBe(30_000);
  });

  it('[K85] a configured value is used, and the replay markers outlive the window both ways by it plus a second', async () => {
    for (const [text, ms] of [['1s', 1000], ['2500ms', 2500], ['45s', 45_000], ['5m', 300_000]] as const) {
      const skew = maxClockSkewMs((await load(redis(text))).store);
      expect(skew).toBe(ms);
      expect(proofJtiTtlMs(skew)).toBe(2 * PROOF_WINDOW_SECONDS * 1000 + ms + 1000);
    }
    expect(proofJtiTtlMs(DEFAULT_MAX_CLOCK_SKEW_MS)).toBe(151_000);
  });

  it.each([
    ['-5s', /expected a duration such as 30s/],
    ['0s', /expected a duration such as 30s/],
    ['999ms', /from 1s to 5m/],
    ['301s', /from 1s to 5m/],
    ['1h', /expected a duration such as 30s/],
    ['30', /expected string, received number/],
    ['soon', /expected a duration such as 30s/],
  ])('[K85] %s is refused at load, at its file:line', async (text, reason) => {
    const message = await refusal(redis(text));
    expect(message).toMatch(/gateway\.yaml:5:\d+: store\.max_clock_skew/);
    expect(message).toMatch(reason);
  });

  it('[K85] the key is Redis\'s only: on the memory store it is an unknown key', async () => {
    expect(await refusal('  kind: memory\n  max_clock_skew: 30s\n')).toMatch(/gateway\.yaml:4:\d+: .*max_clock_skew/);
  });

  it('[K85] any duration in ms, s or m is accepted exactly when it is from 1 s to 5 min (fast-check)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 700_000 }), fc.constantFrom(['ms', 1], ['s', 1000], ['m', 60_000]) as fc.Arbitrary<[string, number]>, async (n, [unit, scale]) => {
        const ms = n * scale;
        const within = ms >= 1000 && ms <= 300_000;
        const result = await load(redis(`${n}${unit}`)).then(
          (config) => maxClockSkewMs(config.store),
          (err: unknown) => err,
        );
        if (within) expect(result).toBe(ms);
        else expect(result).toBeInstanceOf(ConfigError);
      }),
      { numRuns: 60 },
    );
  });
});
