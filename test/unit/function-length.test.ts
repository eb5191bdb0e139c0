/**
 * No function in src/ is longer than 60 lines (its body, from `{` to `}`) unless the line before
 * it says why, as `// long: <reason>`: a long function is one a new maintainer is afraid to
 * touch (issue 12). Nested functions count on their own and within their parent.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const REPO = resolve(import.meta.dirname, '../..');
const MAX_LINES = 60;
const STATED_REASON = /^\s*\/\/ long: \S/;

interface LongFunction {
  where: string;
  name: string;
  lines: number;
}

describe('function length', () => {
  it(`every function in src/ is at most ${MAX_LINES} lines, or says why on the line before it`, () => {
    const found = sourceFiles(join(REPO, 'src')).flatMap((file) => unexplainedLongFunctions(relative(REPO, file), readFileSync(file, 'utf8')));
    expect(found.map((f) => `${f.where} ${f.name}: ${f.lines} lines`)).toEqual([]);
  });

  it('finds a long function of each form, and accepts one whose reason is stated', () => {
    const body = Array.from({ length: MAX_LINES }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const source = [
      `function declared() {\n${body}\n}`,
      `const arrow = () => {\n${body}\n};`,
      `class C {\n  method() {\n${body}\n  }\n}`,
      `const object = { property: function () {\n${body}\n} };`,
      `// long: one table, read top to bottom\nfunction explained() {\n${body}\n}`,
      `function short() {\n  return 1;\n}`,
    ].join('\n');
    expect(unexplainedLongFunctions('example.ts', source).map((f) => [f.name, f.lines])).toEqual([
      ['declared', MAX_LINES + 2],
      ['arrow', MAX_LINES + 2],
      ['method', MAX_LINES + 2],
      ['property', MAX_LINES + 2],
    ]);
  });
});

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.tsx?$/.test(e.name))
    .map((e) => join(e.parentPath, e.name));
}

function unexplainedLongFunctions(fileName: string, text: string): LongFunction[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, fileName.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
  const lines = text.split('\n');
  const lineOf = (position: number) => source.getLineAndCharacterOfPosition(position).line;
  const found: LongFunction[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const body = node.body as ts.Node;
      const length = lineOf(body.getEnd()) - lineOf(body.getStart(source)) + 1;
      const declared = declarationOf(node);
      const first = lineOf(declared.getStart(source));
      if (length > MAX_LINES && !STATED_REASON.test(lines[first - 1] ?? '')) {
        found.push({ where: `${fileName}:${first + 1}`, name: nameOf(node, declared, source), lines: length });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The statement or member that introduces the function, where its reason comment goes. */
function declarationOf(node: ts.Node): ts.Node {
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent)) return parent.parent.parent; // the `const` statement
  if (ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent) || ts.isExportAssignment(parent)) return parent;
  return node;
}

function nameOf(node: ts.Node, declared: ts.Node, source: ts.SourceFile): string {
  const named = (node as { name?: ts.Node }).name ?? (declared === node ? undefined : (node.parent as { name?: ts.Node }).name);
  return named?.getText(source) ?? '(anonymous)';
}
