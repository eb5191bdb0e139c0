/**
 * Property runs for the fuzz suite, in two modes:
 * - default (CI, `npm test`): each property replays the FIXED seeds listed for it in seeds.json
 *   (a base seed with a modest `numRuns`, plus every failure ever saved, replayed by its path), so a
 *   run is deterministic and fast;
 * - `FUZZ=long` (`npm run fuzz`): one fresh random seed per property and `FUZZ_RUNS` runs (default
 *   20 000, scaled down by `longScale` for slow async properties); a failure is appended to
 *   seeds.json (seed, shrunk path, counterexample) before the test fails, so CI replays it from then on.
 */
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rename, rmdir, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { it } from 'vitest';

export const LONG = process.env.FUZZ === 'long';
const LONG_RUNS = Number(process.env.FUZZ_RUNS ?? 20_000);
const SEEDS_FILE = new URL('./seeds.json', import.meta.url);
const LOCK_DIR = new URL('./seeds.json.lock', import.meta.url);

export interface SeedEntry {
  seed: number;
  /** fast-check's counterexample path: replays exactly the shrunk failure. */
  path?: string;
  /** Runs for a base seed (default: the property's `numRuns`). */
  numRuns?: number;
  /** When and what a long run found (for the reader; replay uses seed and path). */
  found?: string;
  counterexample?: string;
}

interface SeedFile {
  description: string;
  properties: Record<string, SeedEntry[]>;
}

export interface FuzzOptions {
  /** Runs per base seed in CI. Keep the whole suite under two minutes. */
  numRuns: number;
  /** Long mode: FUZZ_RUNS × longScale runs (for properties that start servers or write files). */
  longScale?: number;
  /** Per-test timeout in CI (ms). */
  timeoutMs?: number;
}

async function readSeeds(): Promise<SeedFile> {
  return JSON.parse(await readFile(SEEDS_FILE, 'utf8')) as SeedFile;
}

/** A seed per property name when seeds.json lists none: still fixed. */
const defaultSeed = (name: string) => createHash('sha256').update(name).digest().readInt32LE(0);

/** Appends a failure to seeds.json under a directory lock (several test files run at once). */
async function saveFailure(name: string, entry: SeedEntry): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await mkdir(LOCK_DIR);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 200) throw err;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  try {
    const file = await readSeeds();
    (file.properties[name] ??= []).push(entry);
    const tmp = new URL(`./seeds.json.${process.pid}.tmp`, import.meta.url);
    await writeFile(tmp, formatSeeds(file));
    await rename(tmp, SEEDS_FILE);
  } finally {
    await rmdir(LOCK_DIR);
  }
}

/** seeds.json with one entry per line, so a saved failure is a one-line diff. */
function formatSeeds(file: SeedFile): string {
  const properties = Object.entries(file.properties).map(
    ([name, entries]) => `    ${JSON.stringify(name)}: [\n${entries.map((e) => `      ${JSON.stringify(e)}`).join(',\n')}\n    ]`,
  );
  return `{\n  "description": ${JSON.stringify(file.description)},\n  "properties": {\n${properties.join(',\n')}\n  }\n}\n`;
}

function report<Ts>(name: string, details: fc.RunDetails<Ts>): Error {
  return new Error(`[fuzz] ${name}: ${fc.defaultReportMessage(details) ?? 'failed'}`, { cause: details.errorInstance ?? undefined });
}

/**
 * Registers the tests of one property. `property` is built per run (a fresh fc.property or
 * fc.asyncProperty), so async setup can live in the caller's beforeAll.
 */
export function fuzz<Ts>(name: string, property: () => fc.IRawProperty<Ts>, options: FuzzOptions): void {
  if (LONG) {
    it(`[fuzz] ${name}: fresh seed, long run`, async () => {
      const seed = (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) | 0;
      const numRuns = Math.max(1, Math.round(LONG_RUNS * (options.longScale ?? 1)));
      const details = await fc.check(property(), { seed, numRuns });
      if (!details.failed) return;
      await saveFailure(name, {
        seed: details.seed,
        ...(details.counterexamplePath && { path: details.counterexamplePath }),
        found: new Date().toISOString(),
        counterexample: fc.stringify(details.counterexample).slice(0, 2_000),
      });
      throw report(name, details);
    }, 24 * 3600_000);
    return;
  }
  const file = JSON.parse(readFileSync(SEEDS_FILE, 'utf8')) as SeedFile;
  const seeds = file.properties[name] ?? [{ seed: defaultSeed(name) }];
  for (const entry of seeds) {
    const label = entry.path ? `replays saved failure seed ${entry.seed}` : `seed ${entry.seed}`;
    it(`[fuzz] ${name}: ${label}`, async () => {
      const details = await fc.check(property(), {
        seed: entry.seed,
        ...(entry.path ? { path: entry.path } : { numRuns: entry.numRuns ?? options.numRuns }),
      });
      if (details.failed) throw report(name, details);
    }, options.timeoutMs ?? 60_000);
  }
}
