// Reads an upstream's answers for what binds to the principal beyond its
// session (task-binding.ts): the task ids an answer or a task notification
// carries are recorded as the caller's before their bytes are passed on, each
// event's `id:` too (so `Last-Event-ID` resumes only the caller's stream), a
// `tasks/list` result keeps only the caller's own tasks, and a substituted
// task id the upstream echoed is turned back into the caller's original.
// A JSON answer is read once complete (held only when it must be rewritten,
// bounded); in an event stream each event as it completes. An answer that must
// be cut and cannot be read one way only is refused (fail closed); one that is
// only read for records and cannot be read records nothing.
import { isSuccess, type BodyTransform, type ResponseTransform } from '../proxy/response-transform.js';
import { hashKeyPart } from '../store/key-names.js';
import { AmbiguousMemberError, checkMemberNames, readNames, type ReadNames } from './member-names.js';
import { SseEventSplitter, formatSseEvent, parseSseEvent } from './sse-events.js';
import { parseStrictJson } from './strict-json.js';
import { restoreTaskIds } from './task-substitution.js';

export interface BoundAnswersOptions {
  /** Told each task id an answer or notification carries, with its `ttl`/`ttlMs` as sent. */
  task?(taskId: string, ttl: unknown): void;
  /** A JSON answer is read for tasks too (its request may create one); an event stream always is. */
  readJson?: boolean;
  /** Told each event id of an event stream. */
  eventId?(id: string): void;
  /** The hashed ids (`hashKeyPart`) of the caller's own tasks: every task list is cut down to them. */
  ownIds?: ReadonlySet<string>;
  /** Substitute → original task ids (task-substitution.ts). */
  restore?: ReadonlyMap<string, string>;
  /** Upper bound of a JSON body or one event held in memory. */
  maxBytes: number;
}

const EMPTY = Buffer.alloc(0);
const MAX_ANSWER_DEPTH = 256;
/** A JSON answer only read for records: a task's creation answer is small, so past this it is not one. */
const MAX_READ_ONLY_BYTES = 1024 * 1024;
/** An answer with none of these cannot hold a member any reader takes for a task. */
// eslint-disable-next-line no-control-regex -- the class is everything outside ASCII
const MIGHT_HOLD_TASKS = /task|\\u|[^\x00-\x7f]/i;
/** What a text must hold to be read for records only. */
const NAMES_A_TASK = /task/i;
const MESSAGE_MEMBERS = readNames('jsonrpc', 'id', 'method', 'result', 'error', 'params');
const RESULT_MEMBERS = readNames('task', 'tasks', 'taskId', 'resultType', 'ttlMs');
const TASK_MEMBERS = readNames('taskId', 'ttl', 'ttlMs');
/** 2025-11-25 `notifications/tasks/status`, 2026-07-28 `notifications/tasks`. */
const TASK_NOTIFICATION = /^notifications\/tasks(\/|$)/;

export function boundAnswers(options: BoundAnswersOptions): ResponseTransform {
  return (headers, status) => {
    // An error answer is read only to put back a substituted task id (it creates and lists nothing).
    if (!isSuccess(status)) return options.restore ? boundAnswers({ restore: options.restore, maxBytes: options.maxBytes })(headers, 200) : undefined;
    const type = (joined(headers['content-type']) ?? '').trimStart().toLowerCase();
    const isSse = type.includes('text/event-stream');
    if (!isSse && !type.includes('json')) return undefined;
    const rewrites = options.ownIds !== undefined || options.restore !== undefined;
    if (!isSse && !rewrites && !options.readJson) return undefined;
    const encoding = joined(headers['content-encoding']);
    if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
      // Compressed: nothing can be read. Cutting a list or restoring an id must not pass it unread.
      return rewrites ? refuse(`a ${encoding}-encoded body cannot be read for tasks`) : undefined;
    }
    if (isSse) return new SseAnswers(options);
    return rewrites ? new HeldJson(options) : new ReadJson(options);
  };
}

const joined = (value: string | string[] | undefined) => (Array.isArray(value) ? value.join(', ') : value);
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

function refuse(why: string): BodyTransform {
  const fail = (): Buffer => {
    throw new Error(why);
  };
  return { push: fail, end: fail };
}

function members(object: object, names: ReadNames, where: string): Record<string, unknown> {
  try {
    checkMemberNames(object, names, where);
  } catch (err) {
    if (err instanceof AmbiguousMemberError) throw new Error(`the answer cannot be read one way only: ${err.message}`);
    throw err;
  }
  return object as Record<string, unknown>;
}

/** Records the tasks a payload carries and cuts its task lists; the payload when it changed, else undefined. Throws when it cannot be read one way only. */
function readPayload(text: string, options: BoundAnswersOptions): unknown {
  let payload: unknown;
  try {
    payload = parseStrictJson(text, { maxDepth: MAX_ANSWER_DEPTH });
  } catch (err) {
    throw new Error(`the answer cannot be read one way only: ${(err as Error).message}`);
  }
  let changed = false;
  for (const message of Array.isArray(payload) ? payload : [payload]) {
    if (!isObject(message)) continue;
    const { result, method, params } = members(message, MESSAGE_MEMBERS, 'a message');
    if (options.task && typeof method === 'string' && TASK_NOTIFICATION.test(method) && isObject(params)) recordTask(params, options.task);
    if (!isObject(result)) continue;
    const { task, tasks, resultType } = members(result, RESULT_MEMBERS, 'a result');
    if (options.task && isObject(task)) recordTask(task, options.task);
    // 2026-07-28: a CreateTaskResult is the task itself, flat, with resultType "task".
    if (options.task && resultType === 'task') recordTask(result, options.task);
    if (options.ownIds && Array.isArray(tasks)) changed = keepOwn(result as { tasks: unknown[] }, options.ownIds) || changed;
  }
  return changed ? payload : undefined;
}

function recordTask(task: Record<string, unknown>, record: (taskId: string, ttl: unknown) => void): void {
  const { taskId, ttl, ttlMs } = members(task, TASK_MEMBERS, 'a task');
  if (typeof taskId === 'string') record(taskId, ttl ?? ttlMs);
}

/** Cuts `result.tasks` down to the caller's own; a task without a string id is not shown. */
function keepOwn(result: { tasks: unknown[] }, ownIds: ReadonlySet<string>): boolean {
  const kept = result.tasks.filter((task) => {
    const taskId = isObject(task) ? members(task, TASK_MEMBERS, 'a task').taskId : undefined;
    return typeof taskId === 'string' && ownIds.has(hashKeyPart(taskId));
  });
  if (kept.length === result.tasks.length) return false;
  result.tasks = kept;
  return true;
}

/**
 * One JSON text read and rewritten as the options say; throws only where a rewrite is needed.
 * Only read for records, a text without the word is skipped: a task id hidden behind escapes is
 * not recorded, so it is refused to its owner too (fail closed), never given to another.
 */
function rewriteText(text: string, options: BoundAnswersOptions): string | undefined {
  const restored = options.restore ? restoreTaskIds(text, options.restore) : text;
  if (!(options.ownIds === undefined ? NAMES_A_TASK : MIGHT_HOLD_TASKS).test(restored)) return restored === text ? undefined : restored;
  if (options.ownIds === undefined) {
    try {
      readPayload(restored, options);
    } catch {
      // Only read for records: an unreadable answer records nothing (its task is then refused to everyone).
    }
    return restored === text ? undefined : restored;
  }
  const changed = readPayload(restored, options);
  if (changed !== undefined) return JSON.stringify(changed);
  return restored === text ? undefined : restored;
}

/** application/json that must be rewritten (a task list, a restored id): held whole, bounded. */
class HeldJson implements BodyTransform {
  readonly perCaller = true;
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly options: BoundAnswersOptions) {}

  push(chunk: Buffer): Buffer {
    this.size += chunk.length;
    if (this.size > this.options.maxBytes) throw new Error(`a JSON answer exceeds ${this.options.maxBytes} bytes`);
    this.chunks.push(chunk);
    return EMPTY;
  }

  end(): Buffer {
    const body = Buffer.concat(this.chunks, this.size);
    const rewritten = rewriteText(body.toString('utf8'), this.options);
    return rewritten === undefined ? body : Buffer.from(rewritten, 'utf8');
  }
}

/** application/json only read for the tasks it creates: passed on as it comes, a bounded copy read at the end, before the client has the last byte. */
class ReadJson implements BodyTransform {
  private chunks: Buffer[] | undefined = [];
  private size = 0;

  constructor(private readonly options: BoundAnswersOptions) {}

  push(chunk: Buffer): Buffer {
    if (this.chunks) {
      this.size += chunk.length;
      if (this.size > MAX_READ_ONLY_BYTES) this.chunks = undefined;
      else this.chunks.push(chunk);
    }
    return chunk;
  }

  end(): Buffer {
    if (this.chunks) rewriteText(Buffer.concat(this.chunks, this.size).toString('utf8'), this.options);
    this.chunks = undefined;
    return EMPTY;
  }
}

/** text/event-stream: each whole event read for its id and tasks, rewritten when a list was cut or an id restored. */
class SseAnswers implements BodyTransform {
  readonly perCaller: boolean;
  private readonly splitter: SseEventSplitter;
  private first = true;

  constructor(private readonly options: BoundAnswersOptions) {
    this.perCaller = options.ownIds !== undefined || options.restore !== undefined;
    this.splitter = new SseEventSplitter(options.maxBytes);
  }

  push(chunk: Buffer): Buffer {
    const events = this.splitter.push(chunk);
    if (events.length === 0) return EMPTY;
    const out = events.map((raw) => this.read(raw));
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  end(): Buffer {
    // An event cut short is passed as it came: no client dispatches it.
    return this.splitter.rest();
  }

  private read(raw: Buffer): Buffer {
    const bom = this.first && raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf;
    this.first = false;
    const event = parseSseEvent(bom ? raw.subarray(3) : raw);
    const id = eventIdOf(event.otherLines);
    if (id !== undefined && this.options.eventId) this.options.eventId(id);
    if ((event.type !== '' && event.type !== 'message') || event.data === undefined) return raw;
    const rewritten = rewriteText(event.data, this.options);
    if (rewritten === undefined) return raw;
    event.data = rewritten;
    return formatSseEvent(event);
  }
}

/** The event's id as a client takes it (the last `id` field; one holding NUL is ignored); undefined when none or empty. */
export function eventIdOf(lines: readonly string[]): string | undefined {
  let id: string | undefined;
  for (const line of lines) {
    const colon = line.indexOf(':');
    if ((colon === -1 ? line : line.slice(0, colon)) !== 'id') continue;
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (!value.includes('\0')) id = value;
  }
  return id === '' ? undefined : id;
}
