import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { JsonReadingError, parseStrictJson, type JsonReadingFault } from '../../src/policy/strict-json.js';
import { AmbiguousMemberError, checkMemberNames, foldName, readNames } from '../../src/policy/member-names.js';

const parse = (text: string) => parseStrictJson(text, { maxDepth: 128, maxRootItems: 100 });
const faultOf = (text: string): JsonReadingFault | 'accepted' => {
  try {
    parse(text);
    return 'accepted';
  } catch (err) {
    expect(err).toBeInstanceOf(JsonReadingError);
    return (err as JsonReadingError).fault;
  }
};

describe('parseStrictJson', () => {
  it('reads what JSON.parse reads, for any JSON text without duplicates or lone surrogates (property)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom(undefined, 2), (value, indent) => {
        const text = JSON.stringify(value, null, indent);
        // JSON.stringify writes a lone surrogate as an escape (lowercase \\u, lowercase hex): refused
        // here, by design. An escaped backslash before "ud8…" is no escape (seed -1430805854: "\\\\UdA").
        if (/(?:^|[^\\])(?:\\\\)*\\ud[89a-f]/.test(text)) expect(faultOf(text)).toBe('ambiguous');
        else expect(parse(text)).toStrictEqual(JSON.parse(text));
      }),
      { numRuns: 3000 },
    );
  });

  it('accepts exactly what JSON.parse accepts, up to the ambiguities it refuses (property over mutated texts)', () => {
    const pieces = fc.constantFrom('{', '}', '[', ']', ',', ':', '"a"', '"\\u0061"', '1', '-0', '1e400', '0.5e-3', 'true', 'null', ' ', '\t', '"\\ud800"', '"\\ud83d\\ude00"', '"\\x"', '01', '\ufeff', '\u0000', 'NaN');
    fc.assert(
      fc.property(fc.array(pieces, { maxLength: 14 }), (parts) => {
        const text = parts.join('');
        let reference: unknown;
        let referenceOk = true;
        try {
          reference = JSON.parse(text);
        } catch {
          referenceOk = false;
        }
        const fault = faultOf(text);
        if (!referenceOk) expect(fault).not.toBe('accepted');
        else if (fault === 'accepted') expect(parse(text)).toStrictEqual(reference);
        else expect(fault).toBe('ambiguous');
      }),
      { numRuns: 5000 },
    );
  });

  it('[J47] refuses what readers disagree on', () => {
    const cases: Array<[string, JsonReadingFault]> = [
      ['{"a":1,"a":2}', 'ambiguous'],
      ['{"a":1,"\\u0061":2}', 'ambiguous'],
      ['{"p":{"name":"x","name":"y"}}', 'ambiguous'],
      ['[{"k":[{"z":1,"z":1}]}]', 'ambiguous'],
      ['{"__proto__":1,"__proto__":2}', 'ambiguous'],
      ['{"toString":1,"toString":2}', 'ambiguous'],
      ['"\\ud800"', 'ambiguous'],
      ['"\\udc00\\ud800"', 'ambiguous'],
      ['"a\\ud83d"', 'ambiguous'],
      ['1e400', 'ambiguous'],
      ['-1e999', 'ambiguous'],
      ['\ufeff{}', 'syntax'],
      ['{} x', 'syntax'],
      ['{}{}', 'syntax'],
      ['{}\u0000', 'syntax'],
      ['{"a":NaN}', 'syntax'],
      ['{"a":Infinity}', 'syntax'],
      ["{'a':1}", 'syntax'],
      ['{"a":1,}', 'syntax'],
      ['[1,]', 'syntax'],
      ['{"a":"\t"}', 'syntax'],
      ['{"a":01}', 'syntax'],
      ['{"a":1}\u00a0', 'syntax'],
      ['// c\n{}', 'syntax'],
      ['"\\u12"', 'syntax'],
      ['"abc', 'syntax'],
      ['', 'syntax'],
    ];
    for (const [text, fault] of cases) expect(faultOf(text), JSON.stringify(text)).toBe(fault);
  });

  it('keeps __proto__ an own member, never the prototype', () => {
    const value = parse('{"__proto__":{"polluted":true},"a":1}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.keys(value)).toEqual(['__proto__', 'a']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('[J57] bounds nesting and root array length, and refuses the 101st item before reading it', () => {
    expect(faultOf('['.repeat(128) + ']'.repeat(128))).toBe('accepted');
    expect(faultOf('['.repeat(129) + ']'.repeat(129))).toBe('limit');
    expect(faultOf('{"a":'.repeat(200) + '1' + '}'.repeat(200))).toBe('limit');
    expect(faultOf(`[${Array(100).fill('{}').join(',')}]`)).toBe('accepted');
    // The 101st item is refused even though what follows is not JSON at all.
    expect(faultOf(`[${Array(100).fill('{}').join(',')},{{{{`)).toBe('limit');
    // Nested arrays are not batches.
    expect(faultOf(`[[${Array(1000).fill('1').join(',')}]]`)).toBe('accepted');
  });

  it('reads long strings (escapes, astral characters) linearly', () => {
    const long = `${'é😀\\n\\u0041'.repeat(100_000)}`;
    const started = performance.now();
    expect(parse(`"${long}"`)).toBe(JSON.parse(`"${long}"`));
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

describe('member names: one reading whatever the folding', () => {
  const names = readNames('jsonrpc', 'id', 'method', 'params', 'name', 'uri', '_meta');
  const refused = (object: object) => {
    try {
      checkMemberNames(object, names, 'x');
      return false;
    } catch (err) {
      expect(err).toBeInstanceOf(AmbiguousMemberError);
      return true;
    }
  };

  it('[J47] refuses every case and Unicode variant of a read name (Go folds ſ and K; NFKC folds fullwidth)', () => {
    const variants = ['Method', 'METHOD', 'mEthod', 'paramſ', 'PARAMſ', 'ＭETHOD', 'ｍｅｔｈｏｄ', 'ｎａｍｅ', 'Name', 'NAME', 'URI', 'Uri', 'Id', 'ID', 'JSONRPC',
      '_META', '_Meta', '＿meta', 'method\u0000', '\u0000name', 'me\u200bthod', 'me\u00adthod', 'na\u2060me', 'ıd', 'ID\ufe0f', 'ᵘri'];
    for (const variant of variants) expect(refused({ [variant]: 1 }), JSON.stringify(variant)).toBe(true);
    for (const variant of variants) expect(refused({ method: 'x', name: 'y', [variant]: 1 }), JSON.stringify(variant)).toBe(true);
    // Go's own special folds: the Kelvin sign is k, the long s is s.
    expect(foldName('\u212a')).toBe('k');
    expect(foldName('ſ')).toBe('s');
  });

  it('passes the exact names and unrelated members', () => {
    expect(refused({ jsonrpc: '2.0', id: 1, method: 'm', params: {}, name: 'n', uri: 'u', _meta: {}, arguments: {}, Other: 1, other: 2 })).toBe(false);
    expect(refused({ names: 1, method_: 2, 'méthod': 3 })).toBe(false);
  });

  it('folds as the most forgiving reader does (property: any case mix of a read name folds onto it)', () => {
    fc.assert(
      fc.property(fc.constantFrom('jsonrpc', 'method', 'params', 'name', 'uri', '_meta'), fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }), (name, upper) => {
        const variant = [...name].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('');
        expect(foldName(variant)).toBe(name);
        expect(refused({ [variant]: 1 })).toBe(variant !== name);
      }),
    );
  });
});
