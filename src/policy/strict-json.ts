// A JSON reader that refuses what other readers could read differently. The
// gateway judges a body and forwards its bytes; the upstream parses them again
// with its own parser (Python's json and Jackson keep the last duplicate, some
// keep the first, Go replaces a lone surrogate with U+FFFD, …). So every text
// this reader accepts means one thing to all of them: RFC 8259 exactly, and no
// duplicate member names (§4 leaves their meaning open), no lone surrogates
// (escaped or raw), no number that overflows to infinity, bounded nesting.
// Everything else it reads as JSON.parse does.

/** Why a text was refused: not JSON at all, JSON that readers disagree on, or over a bound. */
export type JsonReadingFault = 'syntax' | 'ambiguous' | 'limit';

export class JsonReadingError extends Error {
  override readonly name = 'JsonReadingError';

  constructor(
    readonly fault: JsonReadingFault,
    message: string,
  ) {
    super(message);
  }
}

export interface StrictJsonOptions {
  /** Deepest nesting of arrays and objects (the root value is depth 1). */
  maxDepth: number;
  /** Most items in a root array (a JSON-RPC batch): refused as soon as one more is seen. */
  maxRootItems?: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

// Sticky patterns: V8 runs them over long strings far faster than a char loop.
/** Characters a string may hold as they are (no quote, backslash, control or surrogate). */
// eslint-disable-next-line no-control-regex -- controls must be escaped in JSON strings
const PLAIN_RUN = /[^"\\\u0000-\u001f\ud800-\udfff]*/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const HEX4 = /^[0-9a-fA-F]{4}$/;
/** Strings up to this length are scanned char by char (cheaper than starting a pattern). */
const SHORT_STRING = 64;

const ESCAPES: Readonly<Record<string, string>> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

const hasOwn = (object: object, key: string) => Object.prototype.hasOwnProperty.call(object, key);

/** Parses `text` (already decoded from UTF-8) or throws JsonReadingError. */
export function parseStrictJson(text: string, options: StrictJsonOptions): unknown {
  return new StrictJsonReader(text, options).document();
}

class StrictJsonReader {
  private at = 0;

  constructor(
    private readonly text: string,
    private readonly options: StrictJsonOptions,
  ) {}

  document(): unknown {
    this.skipWhitespace();
    const value = this.value(1);
    this.skipWhitespace();
    if (this.at !== this.text.length) this.fail('syntax', 'data after the JSON value');
    return value;
  }

  private fail(fault: JsonReadingFault, why: string): never {
    throw new JsonReadingError(fault, why);
  }

  private skipWhitespace(): void {
    const { text } = this;
    let at = this.at;
    for (;;) {
      const c = text.charCodeAt(at);
      // RFC 8259 whitespace only: a BOM, NBSP or NUL is not (some readers skip them).
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
      at++;
    }
    this.at = at;
  }

  private value(depth: number): unknown {
    const c = this.text.charCodeAt(this.at);
    if (c === QUOTE) return this.string();
    if (c === OPEN_BRACE) return this.object(depth);
    if (c === OPEN_BRACKET) return this.array(depth);
    if (c === 0x74) return this.literal('true', true);
    if (c === 0x66) return this.literal('false', false);
    if (c === 0x6e) return this.literal('null', null);
    return this.number();
  }

  private literal<T>(word: string, value: T): T {
    if (!this.text.startsWith(word, this.at)) this.fail('syntax', `unexpected character at ${this.at}`);
    this.at += word.length;
    return value;
  }

  private number(): number {
    NUMBER.lastIndex = this.at;
    if (!NUMBER.test(this.text)) this.fail('syntax', `unexpected character at ${this.at}`);
    const value = Number(this.text.slice(this.at, NUMBER.lastIndex));
    // 1e400: Infinity here, an error in Go, inf in Python.
    if (!Number.isFinite(value)) this.fail('ambiguous', 'a number out of range');
    this.at = NUMBER.lastIndex;
    return value;
  }

  private nested(depth: number): void {
    if (depth > this.options.maxDepth) this.fail('limit', `nested deeper than ${this.options.maxDepth} levels`);
  }

  private object(depth: number): Record<string, unknown> {
    this.nested(depth);
    const object: Record<string, unknown> = {};
    this.at++;
    this.skipWhitespace();
    if (this.text.charCodeAt(this.at) === CLOSE_BRACE) {
      this.at++;
      return object;
    }
    for (;;) {
      if (this.text.charCodeAt(this.at) !== QUOTE) this.fail('syntax', `expected a member name at ${this.at}`);
      const key = this.string();
      // Values are never undefined: only a name the prototype also has needs the slower own-member test.
      if (object[key] !== undefined && hasOwn(object, key)) this.fail('ambiguous', 'a duplicate member name');
      this.skipWhitespace();
      if (this.text.charCodeAt(this.at) !== COLON) this.fail('syntax', `expected ':' at ${this.at}`);
      this.at++;
      this.skipWhitespace();
      const value = this.value(depth + 1);
      // An own member, as JSON.parse makes it: never the prototype.
      if (key === '__proto__') Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
      else object[key] = value;
      this.skipWhitespace();
      const c = this.text.charCodeAt(this.at++);
      if (c === CLOSE_BRACE) return object;
      if (c !== COMMA) this.fail('syntax', `expected ',' or '}' at ${this.at - 1}`);
      this.skipWhitespace();
    }
  }

  private array(depth: number): unknown[] {
    this.nested(depth);
    const items: unknown[] = [];
    const maxItems = depth === 1 ? this.options.maxRootItems : undefined;
    this.at++;
    this.skipWhitespace();
    if (this.text.charCodeAt(this.at) === CLOSE_BRACKET) {
      this.at++;
      return items;
    }
    for (;;) {
      if (maxItems !== undefined && items.length === maxItems) this.fail('limit', `more than ${maxItems} items`);
      items.push(this.value(depth + 1));
      this.skipWhitespace();
      const c = this.text.charCodeAt(this.at++);
      if (c === CLOSE_BRACKET) return items;
      if (c !== COMMA) this.fail('syntax', `expected ',' or ']' at ${this.at - 1}`);
      this.skipWhitespace();
    }
  }

  /** At the opening quote; returns the decoded string. */
  private string(): string {
    const { text } = this;
    const start = this.at + 1;
    // Most strings are short and plain: a char loop, then the sticky pattern for long runs.
    let at = start;
    const shortEnd = Math.min(text.length, start + SHORT_STRING);
    let c = 0;
    while (at < shortEnd && (c = text.charCodeAt(at)) >= 0x20 && c !== QUOTE && c !== BACKSLASH && (c < 0xd800 || c > 0xdfff)) at++;
    if (at === shortEnd) {
      PLAIN_RUN.lastIndex = at;
      PLAIN_RUN.test(text);
      at = PLAIN_RUN.lastIndex;
    }
    if (text.charCodeAt(at) === QUOTE) {
      this.at = at + 1;
      return text.slice(start, at);
    }
    let decoded = text.slice(start, at);
    for (;;) {
      c = text.charCodeAt(at);
      if (c === QUOTE) {
        this.at = at + 1;
        return decoded;
      }
      if (c === BACKSLASH) {
        const [chars, length] = this.escape(at);
        decoded += chars;
        at += length;
      } else if (c >= 0xd800 && c <= 0xdbff && isLowSurrogate(text.charCodeAt(at + 1))) {
        decoded += text.slice(at, at + 2);
        at += 2;
      } else if (Number.isNaN(c)) {
        this.fail('syntax', 'an unterminated string');
      } else if (c >= 0xd800 && c <= 0xdfff) {
        this.fail('ambiguous', 'a lone surrogate in a string');
      } else {
        this.fail('syntax', `a control character in a string at ${at}`);
      }
      PLAIN_RUN.lastIndex = at;
      PLAIN_RUN.test(text);
      decoded += text.slice(at, PLAIN_RUN.lastIndex);
      at = PLAIN_RUN.lastIndex;
    }
  }

  /** The escape at `at` (a backslash): its characters and its length in the text. */
  private escape(at: number): [string, number] {
    const kind = this.text.charAt(at + 1);
    if (kind !== 'u') {
      const chars = ESCAPES[kind];
      if (chars === undefined) this.fail('syntax', `an invalid escape at ${at}`);
      return [chars, 2];
    }
    const unit = this.hex4(at + 2);
    if (unit < 0xd800 || unit > 0xdfff) return [String.fromCharCode(unit), 6];
    // A surrogate must come as a high-low pair (two escapes): Go reads a lone one as U+FFFD.
    if (unit <= 0xdbff && this.text.startsWith('\\u', at + 6)) {
      const low = this.hex4(at + 8);
      if (isLowSurrogate(low)) return [String.fromCharCode(unit, low), 12];
    }
    this.fail('ambiguous', 'a lone surrogate in a string');
  }

  private hex4(at: number): number {
    const digits = this.text.slice(at, at + 4);
    if (!HEX4.test(digits)) this.fail('syntax', `an invalid \\u escape at ${at - 2}`);
    return parseInt(digits, 16);
  }
}

const isLowSurrogate = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff;
