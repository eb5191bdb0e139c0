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
import { SseEventTransform } from './sse-event-transform.js';
import { formatSseEvent, type SseEvent } from './sse-events.js';
import { parseStrictJson } from './strict-json.js';
import { restoreTaskIds } from './task-substitution.js';

export interface BoundAnswersOptions {
  /** Told each task id an answer or notification carries, with its `ttl`/`ttlMs` as sent. */
  task?(taskId: string, ttl: unknown): void;
  /** A JSON answer is read for tasks too (its request may create one); an event stream always is. */
  readJson?: boolean;
  /** Told each event id of an event stream. */
  eventId?(id: string): void;
  /** The caller's own tasks by hashed id (`hashKeyPart`): every task list is cut down to them. */
  ownIds?: { has(hashedId: string): boolean };
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

/** What is left of a payload none of whose messages is the caller's to see (task notifications of tasks not its own). */
const HIDDEN = Symbol('hidden');
type Rewritten = string | undefined | typeof HIDDEN;

/** One answer's reader: the tasks created in it so far (an event stream may notify of them later). */
class AnswerReader {
  private readonly created = new Set<string>();
  private changed = false;

  constructor(private readonly options: BoundAnswersOptions) {}

  /**
   * One JSON text read and rewritten as the options say: the text to send instead, undefined to
   * send it as it came, HIDDEN to send nothing. Throws only where a list must be cut. Only read for
   * records, a text without the word is skipped: a task id hidden behind escapes is not recorded,
   * so it is refused to its owner too (fail closed), never given to another.
   */
  rewrite(text: string): Rewritten {
    const { ownIds, restore } = this.options;
    const restored = restore ? restoreTaskIds(text, restore) : text;
    const same = restored === text ? undefined : restored;
    if (!(ownIds === undefined ? NAMES_A_TASK : MIGHT_HOLD_TASKS).test(restored)) return same;
    let read: unknown;
    try {
      read = this.read(restored);
    } catch (err) {
      // Only read for records: an unreadable answer records nothing (its task is then refused to everyone).
      if (ownIds !== undefined) throw err;
      return same;
    }
    if (read === HIDDEN) return HIDDEN;
    return read === undefined ? same : JSON.stringify(read);
  }

  /** The payload when it changed, HIDDEN when nothing of it is left, else undefined. Throws when it cannot be read one way only. */
  private read(text: string): unknown {
    let payload: unknown;
    try {
      payload = parseStrictJson(text, { maxDepth: MAX_ANSWER_DEPTH });
    } catch (err) {
      throw new Error(`the answer cannot be read one way only: ${(err as Error).message}`);
    }
    this.changed = false;
    const messages = Array.isArray(payload) ? payload : [payload];
    const shown = messages.filter((message) => this.message(message));
    if (shown.length < messages.length) return Array.isArray(payload) && shown.length > 0 ? shown : HIDDEN;
    return this.changed ? payload : undefined;
  }

  /** Records the tasks a message creates, cuts its task lists; false when the caller may not see it. */
  private message(message: unknown): boolean {
    if (!isObject(message)) return true;
    const { result, method, params } = members(message, MESSAGE_MEMBERS, 'a message');
    if (typeof method === 'string' && TASK_NOTIFICATION.test(method) && isObject(params)) {
      const { taskId } = members(params, TASK_MEMBERS, 'a task');
      // Notifications are optional (clients poll tasks/get): one not attributable to the caller is not shown.
      return typeof taskId === 'string' && (this.created.has(hashKeyPart(taskId)) || this.options.ownIds?.has(hashKeyPart(taskId)) === true);
    }
    if (!isObject(result)) return true;
    const { task, tasks, resultType } = members(result, RESULT_MEMBERS, 'a result');
    if (isObject(task)) this.record(task);
    // 2026-07-28: a CreateTaskResult is the task itself, flat, with resultType "task".
    if (resultType === 'task') this.record(result);
    if (this.options.ownIds && Array.isArray(tasks) && keepOwn(result as { tasks: unknown[] }, this.options.ownIds)) this.changed = true;
    return true;
  }

  private record(task: Record<string, unknown>): void {
    const { taskId, ttl, ttlMs } = members(task, TASK_MEMBERS, 'a task');
    if (typeof taskId !== 'string' || !this.options.task) return;
    this.created.add(hashKeyPart(taskId));
    this.options.task(taskId, ttl ?? ttlMs);
  }
}

/** Cuts `result.tasks` down to the caller's own; a task without a string id is not shown. */
function keepOwn(result: { tasks: unknown[] }, ownIds: NonNullable<BoundAnswersOptions['ownIds']>): boolean {
  const kept = result.tasks.filter((task) => {
    const taskId = isObject(task) ? members(task, TASK_MEMBERS, 'a task').taskId : undefined;
    return typeof taskId === 'string' && ownIds.has(hashKeyPart(taskId));
  });
  if (kept.length === result.tasks.length) return false;
  result.tasks = kept;
  return true;
}

/** application/json that must be rewritten (a task list, a restored id): held whole, bounded. */
class HeldJson implements BodyTransform {
  readonly perCaller = true;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private readonly reader: AnswerReader;

  constructor(private readonly options: BoundAnswersOptions) {
    this.reader = new AnswerReader(options);
  }

  push(chunk: Buffer): Buffer {
    this.size += chunk.length;
    if (this.size > this.options.maxBytes) throw new Error(`a JSON answer exceeds ${this.options.maxBytes} bytes`);
    this.chunks.push(chunk);
    return EMPTY;
  }

  end(): Buffer {
    const body = Buffer.concat(this.chunks, this.size);
    const rewritten = this.reader.rewrite(body.toString('utf8'));
    // A JSON answer holds no notification: nothing of it is ever hidden.
    return typeof rewritten === 'string' ? Buffer.from(rewritten, 'utf8') : body;
  }
}

/** application/json only read for the tasks it creates: passed on as it comes, a bounded copy read at the end, before the client has the last byte. */
class ReadJson implements BodyTransform {
  readonly readsOnly = true;
  private chunks: Buffer[] | undefined = [];
  private size = 0;
  private readonly reader: AnswerReader;

  constructor(options: BoundAnswersOptions) {
    this.reader = new AnswerReader(options);
  }

  push(chunk: Buffer): Buffer {
    if (this.chunks) {
      this.size += chunk.length;
      if (this.size > MAX_READ_ONLY_BYTES) this.chunks = undefined;
      else this.chunks.push(chunk);
    }
    return chunk;
  }

  end(): Buffer {
    if (this.chunks) this.reader.rewrite(Buffer.concat(this.chunks, this.size).toString('utf8'));
    this.chunks = undefined;
    return EMPTY;
  }
}

/** text/event-stream: each whole event read for its id and tasks, rewritten when a list was cut or an id restored. */
class SseAnswers extends SseEventTransform {
  private readonly reader: AnswerReader;

  constructor(private readonly options: BoundAnswersOptions) {
    // Task notifications are shown to their task's principal only: every stream is the caller's own.
    super(options.maxBytes);
    this.reader = new AnswerReader(options);
  }

  protected rewriteEvent(event: SseEvent, raw: Buffer): Buffer {
    const rewritten = (event.type !== '' && event.type !== 'message') || event.data === undefined ? undefined : this.reader.rewrite(event.data);
    if (rewritten === HIDDEN) return EMPTY;
    // Recorded before the event passes on: the client may resume after it at once.
    const id = eventIdOf(event.otherLines);
    if (id !== undefined && this.options.eventId) this.options.eventId(id);
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
