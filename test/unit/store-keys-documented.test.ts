// docs/storage.md lists every store key with its TTL and what is hashed or
// encrypted: a key namespace added to src/store/key-names.ts without a row there fails here.
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
});
