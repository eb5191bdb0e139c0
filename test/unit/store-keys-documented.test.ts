// docs/storage.md lists every store key with its TTL and what is hashed or
// encrypted: a key namespace added to src/store/key-names.ts without a row there fails here;
// and every class the memory store never evicts with the guard that keeps invalid requests out of it.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import * as keys from '../../src/store/key-names.js';

describe('docs/storage.md', () => {
  it('has a table row for every key namespace in key-names.ts', async () => {
    const doc = await readFile(new URL('../../docs/storage.md', import.meta.url), 'utf8');
    const rows = doc.split('\n').filter((line) => line.startsWith('| `'));
    const namespaces = Object.entries(keys)
      .filter(([name, value]) => name !== 'hashKeyPart' && typeof value === 'function')
      .map(([, build]) => (build as (...parts: string[]) => string)('x', 'x', 'x').split(':')[0] as string);
    expect(namespaces.length).toBeGreaterThan(10);
    const undocumented = namespaces.filter((ns) => !rows.some((row) => row.startsWith(`| \`${ns}:`)));
    expect(undocumented).toEqual([]);
  });

  it('names, for every never-evicted class, what must be valid before it is written (the guards table)', async () => {
    const doc = await readFile(new URL('../../docs/storage.md', import.meta.url), 'utf8');
    const start = doc.indexOf('| class | written only after | kept | bound on what one caller can write |');
    expect(start).toBeGreaterThan(0);
    const table = doc.slice(start).split('\n\n')[0]!.split('\n').slice(2);
    const guarded = table.map((row) => /^\| `([a-z-]+):` \| ([^|]+)\|/.exec(row)).filter((m) => m !== null);
    expect(guarded.map((m) => m![1]).sort()).toEqual([...keys.NEVER_EVICTED_CLASSES].sort());
    for (const m of guarded) expect(m![2]!.trim().length, m![1]).toBeGreaterThan(20);
  });
});
