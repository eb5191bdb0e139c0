// The import graph of src/ has no circle and no arrow pointing up the layers
// of docs/architecture.md ("Layers"). Every relative import counts, `import
// type` included: none crosses a layer upward today, and a type that must be
// shared belongs in a lower, type-only module (as auth/verifier.ts is).
// Imports between folders of the same layer are allowed; circles never.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

/** docs/architecture.md's layers, bottom first: a file may import its own layer or lower ones. */
const LAYERS: Record<string, number> = {
  config: 1,
  errors: 2,
  observability: 2,
  store: 2,
  auth: 3,
  policy: 3,
  proxy: 3,
  'upstream-auth': 3,
  metadata: 3,
  'authorization-server': 4,
  routes: 5,
  check: 5,
  'app.ts': 6,
  'server.ts': 6,
  'gateway.ts': 6,
  gateway: 6,
  'cli.ts': 6,
  demo: 6,
};

/**
 * docs/architecture.md's layers inside the built-in authorization server, bottom
 * first: a folder of `authorization-server/` (or a file at its root) may import
 * its own group or lower ones.
 */
const AS_LAYERS: Record<string, number> = {
  helpers: 1,
  keys: 2,
  'context.ts': 3,
  tokens: 4,
  clients: 4,
  idp: 5,
  interactions: 5,
  grants: 5,
  'upstream-accounts': 5,
  pages: 6,
  login: 7,
  authorization: 8,
  endpoints: 9,
  'index.ts': 10,
};

/** `import … from './x.js'`, `export … from '../y.js'`, `import './z.js'` and `import('./w.js')`. */
const RELATIVE_IMPORT = /(?:\bfrom\s+|\bimport\s*\(?\s*)'(\.{1,2}\/[^']+)'/g;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [relative(SRC, path)] : [];
  });
}

const files = sourceFiles(SRC);
const known = new Set(files);

/** `auth/jwks.js` → `auth/jwks.ts` (or .tsx, or the folder's index.ts). */
function resolveImport(from: string, specifier: string): string | undefined {
  const target = join(dirname(from), specifier).replace(/\.js$/, '');
  return [`${target}.ts`, `${target}.tsx`, join(target, 'index.ts')].find((candidate) => known.has(candidate));
}

const imports = new Map<string, string[]>(
  files.map((file) => {
    const text = readFileSync(join(SRC, file), 'utf8');
    const targets = [...text.matchAll(RELATIVE_IMPORT)].map((m) => resolveImport(file, m[1]!) ?? `${m[1]} (unresolved)`);
    return [file, targets];
  }),
);

const layerOf = (file: string) => LAYERS[file.split('/')[0]!];
const AS = 'authorization-server/';
const asFiles = files.filter((f) => f.startsWith(AS));
const asLayerOf = (file: string) => AS_LAYERS[file.slice(AS.length).split('/')[0]!];

describe('the import graph of src/', () => {
  it('resolves every relative import to a file', () => {
    const unresolved = [...imports].flatMap(([file, targets]) => targets.filter((t) => t.endsWith('(unresolved)')).map((t) => `${file} → ${t}`));
    expect(unresolved).toEqual([]);
  });

  it('places every top-level folder and file in a layer', () => {
    const unplaced = [...new Set(files.map((f) => f.split('/')[0]!))].filter((top) => LAYERS[top] === undefined);
    expect(unplaced, 'add them to LAYERS here and to the table in docs/architecture.md').toEqual([]);
  });

  it('has no arrow pointing up a layer', () => {
    const upward = [...imports].flatMap(([file, targets]) =>
      targets.filter((t) => (layerOf(t) ?? 0) > (layerOf(file) ?? Infinity)).map((t) => `${file} (layer ${layerOf(file)}) → ${t} (layer ${layerOf(t)})`),
    );
    expect(upward).toEqual([]);
  });

  it('places every folder and root file of the authorization server in a layer', () => {
    const unplaced = [...new Set(asFiles.map((f) => f.slice(AS.length).split('/')[0]!))].filter((group) => AS_LAYERS[group] === undefined);
    expect(unplaced, 'add them to AS_LAYERS here and to the authorization server\'s layers in docs/architecture.md').toEqual([]);
  });

  it('has no arrow pointing up a layer inside the authorization server', () => {
    const upward = asFiles.flatMap((file) =>
      (imports.get(file) ?? [])
        .filter((t) => t.startsWith(AS) && asLayerOf(t)! > asLayerOf(file)!)
        .map((t) => `${file} (AS layer ${asLayerOf(file)}) → ${t} (AS layer ${asLayerOf(t)})`),
    );
    expect(upward).toEqual([]);
  });

  it('has no circle', () => {
    const circles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const path: string[] = [];
    const visit = (file: string): void => {
      state.set(file, 'open');
      path.push(file);
      for (const target of imports.get(file) ?? []) {
        if (state.get(target) === 'open') circles.push([...path.slice(path.indexOf(target)), target].join(' → '));
        else if (!state.has(target) && imports.has(target)) visit(target);
      }
      path.pop();
      state.set(file, 'done');
    };
    for (const file of files) if (!state.has(file)) visit(file);
    expect(circles).toEqual([]);
  });

  it('sees the imports it checks (a parser that finds nothing would pass everything)', () => {
    expect(imports.get('auth/jwt-verifier.ts')).toContain('auth/verifier.ts');
    expect(imports.get('config/resolve.ts')).toContain('config/reserved-paths.ts');
    expect(imports.get('authorization-server/endpoints/token.ts')).toContain('authorization-server/grants/grant-handler.ts');
  });
});
