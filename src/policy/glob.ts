// Glob patterns of policy rules (tool names, resource URIs, prompt names,
// methods). Case-sensitive; `*` is any run of characters within one `/`
// segment, `**` any run across segments (`a/**/b` also matches `a/b`), `?` one
// character other than `/`; everything else is literal (no escapes, no
// classes, no braces). A pattern is compiled once, at config load, into a
// small automaton that is run by set simulation: matching costs
// O(input × pattern) whatever the input, so no pattern/input pair can
// backtrack exponentially the way a RegExp with several `*` can (ReDoS).

type Op =
  /** one code point equal to `char` */
  | 'literal'
  /** one code point other than `/` */
  | 'any-char'
  /** zero or more code points other than `/` */
  | 'star'
  /** zero or more code points; as `**` + `/`, it may also skip that `/` */
  | 'globstar';

interface Instruction {
  op: Op;
  char?: string;
  /** GlobStar followed by `/` at a segment start: `**\/` may match nothing at all. */
  skipsSlash?: boolean;
}

export interface Glob {
  readonly pattern: string;
  test(subject: string): boolean;
}

export function compileGlob(pattern: string): Glob {
  const chars = Array.from(pattern);
  if (!chars.some((c) => c === '*' || c === '?')) {
    return { pattern, test: (subject) => subject === pattern };
  }
  const program = compile(chars);
  return { pattern, test: (subject) => run(program, subject) };
}

function compile(chars: string[]): Instruction[] {
  const program: Instruction[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === '?') program.push({ op: 'any-char' });
    else if (c !== '*') program.push({ op: 'literal', char: c });
    else {
      let run = 1;
      while (chars[i + 1] === '*') {
        run++;
        i++;
      }
      if (run === 1) {
        program.push({ op: 'star' });
        continue;
      }
      // `**` at the start of a segment and followed by `/`: `a/**/b` matches `a/b`.
      const atSegmentStart = i - run < 0 || chars[i - run] === '/';
      program.push({ op: 'globstar', skipsSlash: atSegmentStart && chars[i + 1] === '/' });
    }
  }
  return program;
}

/** Thompson-style simulation: the set of program positions reachable after each code point. */
function run(program: Instruction[], subject: string): boolean {
  const size = program.length + 1;
  let current = new Uint8Array(size);
  let next = new Uint8Array(size);
  addClosure(program, current, 0);
  for (const c of subject) {
    next.fill(0);
    let alive = false;
    for (let pc = 0; pc < program.length; pc++) {
      if (!current[pc]) continue;
      const ins = program[pc]!;
      switch (ins.op) {
        case 'literal':
          if (ins.char === c) alive = addClosure(program, next, pc + 1) || alive;
          break;
        case 'any-char':
          if (c !== '/') alive = addClosure(program, next, pc + 1) || alive;
          break;
        case 'star':
          if (c !== '/') alive = addClosure(program, next, pc) || alive;
          break;
        case 'globstar':
          // Having consumed something, `**/` must go on to its `/`: no skip.
          alive = addClosure(program, next, pc, true) || alive;
          break;
      }
    }
    if (!alive) return false;
    [current, next] = [next, current];
  }
  return current[program.length] !== 0;
}

/**
 * Marks `pc` and every position reachable from it without consuming input.
 * Marks: 1 reached, 2 reached afresh. Only a fresh arrival at `**\/` may skip
 * it; arriving by its own loop (something consumed) it must reach its `/`.
 */
function addClosure(program: Instruction[], set: Uint8Array, pc: number, looping = false): boolean {
  while (true) {
    const mark = looping ? 1 : 2;
    const before = set[pc]!;
    if (before >= mark) return true;
    set[pc] = mark;
    const ins = program[pc];
    if (ins === undefined) return true;
    if (mark === 2 && ins.op === 'globstar' && ins.skipsSlash) addClosure(program, set, pc + 2);
    // What follows without consuming was explored on the first arrival.
    if (before !== 0 || (ins.op !== 'star' && ins.op !== 'globstar')) return true;
    looping = false;
    pc++;
  }
}
