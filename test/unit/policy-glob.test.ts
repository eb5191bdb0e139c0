import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { compileGlob } from '../../src/policy/glob.js';

/** The obvious (backtracking) RegExp translation: the reference the automaton must agree with. */
function referenceRegExp(pattern: string): RegExp {
  let source = '';
  const chars = Array.from(pattern);
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    if (c === '*') {
      let run = 1;
      while (chars[i + 1] === '*') {
        run++;
        i++;
      }
      if (run === 1) source += '[^/]*';
      else if ((i - run < 0 || chars[i - run] === '/') && chars[i + 1] === '/') {
        source += '(?:.*/)?';
        i++;
      } else source += '.*';
    } else if (c === '?') source += '[^/]';
    else source += c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  return new RegExp(`^${source}$`, 'su');
}

const slashes = (s: string) => s.split('/').length - 1;

describe('compileGlob', () => {
  it.each([
    ['delete_*', 'delete_repo', true],
    ['delete_*', 'delete_', true],
    ['delete_*', 'Delete_repo', false],
    ['delete_*', 'xdelete_repo', false],
    ['shell', 'shell', true],
    ['shell', 'shell2', false],
    ['get-?', 'get-x', true],
    ['get-?', 'get-xy', false],
    ['get-?', 'get-/', false],
    ['file:///secret/*', 'file:///secret/a', true],
    ['file:///secret/*', 'file:///secret/a/b', false],
    ['file:///secret/**', 'file:///secret/a/b', true],
    ['file:///secret/**', 'file:///secret/', true],
    ['file:///secret/**', 'file:///secretx', false],
    ['a/**/b', 'a/b', true],
    ['a/**/b', 'a/x/y/b', true],
    ['a/**/b', 'ab', false],
    ['**/b', 'b', true],
    ['**/b', 'x/y/b', true],
    ['tools/*', 'tools/call', true],
    ['tools/*', 'tools/call/x', false],
    ['*', '', true],
    ['*', 'a/b', false],
    ['**', 'a/b', true],
    ['a.b', 'axb', false],
    ['(a|b)+', '(a|b)+', true],
    ['[ab]', 'a', false],
    ['\\*', '\\*', true],
    ['\\*', '\\x', true],
    ['e*', 'école', false],
    ['é*', 'école', true],
    ['é?ole', 'école', true],
    ['?', '😀', true],
  ])('%s against %s → %s', (pattern, subject, expected) => {
    expect(compileGlob(pattern).test(subject)).toBe(expected);
  });

  it('never lets a single * or ? cross a /', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom('a', 'b', '/', '*', '?') }).filter((p) => !p.includes('**')),
        fc.string({ unit: fc.constantFrom('a', 'b', '/') }),
        (pattern, subject) => {
          if (compileGlob(pattern).test(subject)) expect(slashes(subject)).toBe(slashes(pattern));
        },
      ),
      { numRuns: 5000 },
    );
  });

  it('agrees with the reference RegExp', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom('a', 'b', '/', '*', '?', '.'), maxLength: 10 }),
        fc.string({ unit: fc.constantFrom('a', 'b', '/', '.'), maxLength: 12 }),
        (pattern, subject) => {
          expect(compileGlob(pattern).test(subject)).toBe(referenceRegExp(pattern).test(subject));
        },
      ),
      { numRuns: 20_000 },
    );
  });

  it('compiles and runs on any string without throwing', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (pattern, subject) => {
        const glob = compileGlob(pattern);
        expect(typeof glob.test(subject)).toBe('boolean');
        expect(glob.test(pattern)).toBe(referenceRegExp(pattern).test(pattern));
      }),
      { numRuns: 3000 },
    );
  });

  it('matches in time linear in the input where a backtracking RegExp would not', () => {
    const pattern = '*a*a*a*a*a*a*a*a*b';
    const subject = 'a'.repeat(200_000);
    const started = performance.now();
    expect(compileGlob(pattern).test(subject)).toBe(false);
    expect(compileGlob('**a**a**a**a**a**b').test(subject)).toBe(false);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
