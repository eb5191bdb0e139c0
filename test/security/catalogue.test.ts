/**
 * Every case of the attack catalogue (SECURITY-CASES, 85 cases in groups A–K) has a named test:
 * some describe/it title under test/security carries its tag (`[A1]` … `[K85]`), and SECURITY.md's
 * catalogue table names, for each case, every test file whose titles carry that tag. Cases the
 * table marks "covered by as-idp" are checked in the third-party login's suite (as-idp-*.test.ts),
 * whose titles name them without brackets.
 */
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url).pathname;
const SECURITY_DIR = join(ROOT, 'test/security');
/** The catalogue's groups and the case numbers in each. */
const GROUPS: Record<string, [number, number]> = { A: [1, 8], B: [9, 10], C: [11, 13], D: [14, 18], E: [19, 22], F: [23, 26], G: [27, 33], H: [34, 42], I: [43, 45], J: [46, 62], K: [63, 85] };
const CASES = 85;
const groupOf = (n: number) => Object.entries(GROUPS).find(([, [lo, hi]]) => n >= lo && n <= hi)![0];

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? testFiles(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : [],
  );
}

/** The index just past the parenthesised group starting at `open` (strings skipped). */
function skipParens(src: string, open: number): number {
  let depth = 0;
  for (let i = open; i < src.length; i++) {
    const ch = src[i]!;
    if (ch === "'" || ch === '"' || ch === '`') i = skipString(src, i) - 1;
    else if (ch === '(') depth++;
    else if (ch === ')' && --depth === 0) return i + 1;
  }
  return src.length;
}

function skipString(src: string, start: number): number {
  const quote = src[start]!;
  for (let i = start + 1; i < src.length; i++) {
    if (src[i] === '\\') i++;
    else if (src[i] === quote) return i + 1;
  }
  return src.length;
}

/** The literal titles of describe/it/test calls (also `.each(table)(title)` and `.skip`/`.skipIf(x)`). */
export function testTitles(src: string): string[] {
  const titles: string[] = [];
  const call = /\b(describe\w*|it|test)\b((?:\.\w+(?:\([^()]*\))?)*)\s*\(/g;
  for (let m = call.exec(src); m; m = call.exec(src)) {
    let at = m.index + m[0].length;
    if (/\.each$/.test(m[2]!)) {
      at = skipParens(src, at - 1);
      if (src[at] !== '(') continue;
      at++;
    }
    while (/\s/.test(src[at] ?? '')) at++;
    const quote = src[at];
    if (quote !== "'" && quote !== '"' && quote !== '`') continue;
    titles.push(src.slice(at + 1, skipString(src, at) - 1));
  }
  return titles;
}

// This file's own parser check holds sample titles: not a catalogue test.
const files = testFiles(SECURITY_DIR).filter((f) => !/\/as-idp-[^/]*\.test\.ts$/.test(f) && !f.endsWith('/catalogue.test.ts'));
const idpFiles = testFiles(SECURITY_DIR).filter((f) => /\/as-idp-[^/]*\.test\.ts$/.test(f));
/** case number → files whose titles carry its tag */
const tagged = new Map<number, Set<string>>();
const badTags: string[] = [];
for (const file of files) {
  for (const title of testTitles(readFileSync(file, 'utf8'))) {
    for (const [, group, num] of title.matchAll(/\[([A-K])(\d{1,2})\]/g)) {
      const n = Number(num);
      if (n < 1 || n > CASES || groupOf(n) !== group) badTags.push(`${relative(ROOT, file)}: [${group}${num}] in "${title}"`);
      else (tagged.get(n) ?? tagged.set(n, new Set()).get(n)!).add(relative(ROOT, file));
    }
  }
}

/** SECURITY.md catalogue rows: `| 14 | D | … | file, file |` → files named in backticks. */
function catalogueTable(): Map<number, { files: string[]; idp: boolean }> {
  const rows = new Map<number, { files: string[]; idp: boolean }>();
  const text = readFileSync(join(ROOT, 'SECURITY.md'), 'utf8');
  for (const line of text.split('\n')) {
    const m = /^\|\s*(\d{1,2})\s*\|\s*([A-K])\s*\|(.*)\|\s*$/.exec(line);
    if (!m) continue;
    const n = Number(m[1]);
    expect(rows.has(n), `case ${n} appears twice in SECURITY.md`).toBe(false);
    expect(m[2], `case ${n} is in group ${groupOf(n)}`).toBe(groupOf(n));
    rows.set(n, { files: [...m[3]!.matchAll(/`(test\/[^`]+\.test\.ts)`/g)].map((f) => f[1]!), idp: /covered by as-idp/.test(m[3]!) });
  }
  return rows;
}

describe('the attack catalogue', () => {
  it('the title parser finds titles in every security test file', () => {
    for (const file of files) expect(testTitles(readFileSync(file, 'utf8')).length, relative(ROOT, file)).toBeGreaterThan(0);
    expect(testTitles("describe('[A1] x', () => { it.each([['a', (s: string) => s.replace(/(x)/, '')]])('[B9] %s', () => {}); });")).toEqual(['[A1] x', '[B9] %s']);
  });

  // The catalogue itself lives beside the repository (../shared) on CI and developer machines.
  it.skipIf(!existsSync(join(ROOT, '../shared/SECURITY-CASES.md')))('this test knows every case of SECURITY-CASES.md and its group', () => {
    const cases = readFileSync(join(ROOT, '../shared/SECURITY-CASES.md'), 'utf8');
    const numbered = [...cases.matchAll(/^(\d{1,2})\. /gm)].map((m) => Number(m[1]));
    expect(numbered).toEqual(Array.from({ length: CASES }, (_, i) => i + 1));
    for (const [, letter, body] of cases.matchAll(/^## ([A-Z])\. [^\n]*\n([\s\S]*?)(?=^## |$(?![\s\S]))/gm)) {
      for (const [, num] of body!.matchAll(/^(\d{1,2})\. /gm)) expect(groupOf(Number(num)), `case ${num}`).toBe(letter);
    }
  });

  it('every tag names a case of its own group', () => {
    expect(badTags).toEqual([]);
  });

  it('every case 1–85 has at least one named test', () => {
    const table = catalogueTable();
    const missing: number[] = [];
    for (let n = 1; n <= CASES; n++) {
      if (tagged.has(n)) continue;
      const idpTitles = idpFiles.flatMap((f) => testTitles(readFileSync(f, 'utf8')));
      const re = new RegExp(`\\b${groupOf(n)}${n}\\b`);
      if (table.get(n)?.idp && idpTitles.some((t) => re.test(t))) continue;
      missing.push(n);
    }
    expect(missing, 'cases without a test whose title carries their tag').toEqual([]);
  });

  it('SECURITY.md maps every case, to files that exist and that carry its tag, and names every file that does', () => {
    const table = catalogueTable();
    expect([...table.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: CASES }, (_, i) => i + 1));
    for (const [n, row] of table) {
      for (const file of row.files) expect(existsSync(join(ROOT, file)), `SECURITY.md case ${n}: ${file} does not exist`).toBe(true);
      const carrying = [...(tagged.get(n) ?? [])].sort();
      expect(row.files.filter((f) => !/\/as-idp-/.test(f)).sort(), `SECURITY.md case ${n} must list exactly the files tagged [${groupOf(n)}${n}]`).toEqual(carrying);
      if (row.idp) expect(idpFiles.length, `case ${n} is covered by as-idp-*.test.ts, which is missing`).toBeGreaterThan(0);
    }
  });
});
