// Parses one YAML file and keeps its syntax tree, so a problem found later
// (by zod or by resolution) can be reported at the line and column of the
// value that caused it.
import { LineCounter, isMap, isNode, isScalar, parseDocument, type Document } from 'yaml';
import type { ConfigIssue } from './config-error.js';

export type ConfigPath = readonly PropertyKey[];

/**
 * An issue about the value at `path` (with `key`: that key of the mapping at `path`),
 * placed at its node or its nearest existing parent, its message prefixed with the path.
 */
export type Locate = (path: ConfigPath, message: string, key?: string) => ConfigIssue;

export interface YamlFile {
  /** The plain value; undefined when the file has issues. */
  data: unknown;
  at: Locate;
  issues: ConfigIssue[];
}

// A few aliases are fine (shared rules); an exponential "billion laughs"
// expansion is not.
const MAX_ALIAS_COUNT = 50;

export function parseYamlFile(file: string, text: string): YamlFile {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const issueAt = (offset: number, message: string): ConfigIssue => {
    const { line, col } = lineCounter.linePos(offset);
    return { file, line, column: col, message };
  };
  const at: Locate = (path, message, key) => {
    const full = key === undefined ? path : [...path, key];
    return issueAt(offsetOf(doc, path, key), full.length > 0 ? `${pathLabel(full)}: ${message}` : message);
  };

  // Warnings (unknown tags and the like) are errors too: a config must mean one thing.
  const issues = [...doc.errors, ...doc.warnings].map((e) =>
    issueAt(e.pos[0], e.code === 'MULTIPLE_DOCS' ? 'a config file holds one YAML document (no second ---)' : e.message),
  );
  if (issues.length === 0 && doc.contents === null) issues.push(issueAt(0, 'the file is empty'));
  if (issues.length > 0) return { data: undefined, at, issues };
  try {
    return { data: doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT }), at, issues };
  } catch (err) {
    return { data: undefined, at, issues: [at([], (err as Error).message)] };
  }
}

/** `rules[0].match.tool` */
function pathLabel(path: ConfigPath): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i > 0 ? '.' : ''}${String(p)}`)).join('');
}

function offsetOf(doc: Document, path: ConfigPath, key?: string): number {
  if (key !== undefined) {
    const map = doc.getIn(path, true);
    const pair = isMap(map) ? map.items.find((p) => isScalar(p.key) && p.key.value === key) : undefined;
    if (isNode(pair?.key) && pair.key.range) return pair.key.range[0];
  }
  // A missing key (or a path through an alias) has no node: point at its parent.
  for (let n = path.length; n >= 0; n--) {
    const node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    if (isNode(node) && node.range) return node.range[0];
  }
  return 0;
}
