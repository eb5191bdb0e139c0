// A task id the caller does not own goes upstream as an id the upstream
// cannot know, so the upstream itself answers as it answers any unknown task,
// in its own revision's words (DESIGN.md §8.3): the gateway never writes that
// error. The substitute has the original's shape (a UUID stays a UUID, 32 hex
// digits stay 32 hex digits: an upstream checking the format answers "not
// found", not "malformed"); where the shape leaves too few random bits to be
// unguessable it is a random UUID instead. The answer gets the original id back
// wherever the upstream echoed the substitute.
import { randomBytes, randomUUID } from 'node:crypto';
import type { JsonRpcMessage, ParsedRequest } from './json-rpc.js';

/** Below this many random bits a substitute could name a task that exists. */
const MIN_RANDOM_BITS = 96;
const HEX = '0123456789abcdef';
const DIGITS = '0123456789';
const LOWER = 'abcdefghijklmnopqrstuvwxyz';
const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** What each character may become, by what it is: hex digits stay hex (UUIDs, hex ids), letters stay letters of their case. */
function alphabetOf(char: string, hexOnly: boolean): string | undefined {
  if (hexOnly && /[0-9a-f]/.test(char)) return HEX;
  if (hexOnly && /[A-F]/.test(char)) return HEX.toUpperCase();
  if (/[0-9]/.test(char)) return DIGITS;
  if (/[a-z]/.test(char)) return LOWER;
  if (/[A-Z]/.test(char)) return UPPER;
  return undefined;
}

/** A random id shaped like `taskId`, or a random UUID when that shape is too small to be unguessable. */
export function substituteTaskId(taskId: string): string {
  const hexOnly = /^[0-9a-fA-F-]+$/.test(taskId);
  const chars = [...taskId];
  const random = randomBytes(chars.length * 2);
  let bits = 0;
  const out = chars.map((char, i) => {
    const alphabet = alphabetOf(char, hexOnly);
    if (alphabet === undefined) return char;
    bits += Math.log2(alphabet.length);
    return alphabet[random.readUInt16BE(i * 2) % alphabet.length]!;
  });
  return bits >= MIN_RANDOM_BITS ? out.join('') : randomUUID();
}

export interface Substitution {
  /** The request body to forward. */
  body: Buffer;
  /** Substitute → original: what the answer gets back (string originals only: the echo is a string). */
  restore: ReadonlyMap<string, string>;
  /** Each original's text as a header could spell it (`1` and `["1"]` as "1" too) → its substitute. */
  headerNames: ReadonlyMap<string, string>;
}

/** The body with each of `foreign`'s messages' `params.taskId` replaced (the parsed messages are left as they are). */
export function substituteTasks(request: ParsedRequest, foreign: readonly JsonRpcMessage[]): Substitution {
  const restore = new Map<string, string>();
  const headerNames = new Map<string, string>();
  const replaced = new Map<unknown, Record<string, unknown>>();
  for (const message of foreign) {
    const params = message.params as Record<string, unknown>;
    const original = params.taskId;
    // A non-string id is never owned: it goes up as an unknown string id, as an unknown task would.
    const substitute = typeof original === 'string' ? substituteTaskId(original) : randomUUID();
    if (typeof original === 'string') restore.set(substitute, original);
    for (const text of [typeof original === 'string' ? original : JSON.stringify(original), String(original)]) headerNames.set(text, substitute);
    replaced.set(params, { ...params, taskId: substitute });
  }
  const payload = request.batch ? request.messages : request.messages[0];
  const body = JSON.stringify(payload, (_key, value: unknown) => replaced.get(value) ?? value);
  return { body: Buffer.from(body, 'utf8'), restore, headerNames };
}

/** The answer text with each substitute the upstream echoed turned back into the original (JSON-escaped). */
export function restoreTaskIds(text: string, restore: ReadonlyMap<string, string>): string {
  let out = text;
  for (const [substitute, original] of restore) {
    if (out.includes(substitute)) out = out.split(substitute).join(JSON.stringify(original).slice(1, -1));
  }
  return out;
}
