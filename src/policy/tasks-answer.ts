// Reads the answers to requests that concern MCP tasks (task-ownership.ts):
// each `result.task.taskId` an upstream answers a task-augmented request with
// is recorded as the caller's before its bytes are passed on, and each
// `result.tasks` (a `tasks/list` answer) keeps only the caller's own tasks.
// A JSON answer is one bounded body; in an event stream each event is read as
// it completes. An answer this reader cannot read one way only is cut (fail
// closed), as the tools/list filter cuts one.
import type { BodyTransform, ResponseTransform } from '../proxy/response-transform.js';
import { hashKeyPart } from '../store/key-names.js';
import { AmbiguousMemberError, checkMemberNames, readNames, type ReadNames } from './member-names.js';
import { SseEventSplitter, formatSseEvent, parseSseEvent } from './sse-events.js';
import { parseStrictJson } from './strict-json.js';

export interface TasksAnswerOptions {
  /** Told each task the upstream created for this request: its id and its `ttl` as sent. */
  created?(taskId: string, ttl: unknown): void;
  /** The hashed ids (`hashKeyPart`) of the caller's own tasks: every task list is cut down to them. */
  ownIds?: ReadonlySet<string>;
  /** Upper bound of a JSON body or one event held in memory. */
  maxBytes: number;
}

const EMPTY = Buffer.alloc(0);
const MAX_ANSWER_DEPTH = 256;
/** An answer with none of these cannot hold a member any reader takes for `task` or `tasks`. */
// eslint-disable-next-line no-control-regex -- the class is everything outside ASCII
const MIGHT_HOLD_TASKS = /task|\\u|[^\x00-\x7f]/i;
const MESSAGE_MEMBERS = readNames('jsonrpc', 'id', 'method', 'result', 'error', 'params');
const RESULT_MEMBERS = readNames('task', 'tasks');
const TASK_MEMBERS = readNames('taskId', 'ttl');

export function tasksAnswer(options: TasksAnswerOptions): ResponseTransform {
  return (headers) => {
    const encoding = joined(headers['content-encoding']);
    const type = (joined(headers['content-type']) ?? '').trimStart().toLowerCase();
    const isSse = type.includes('text/event-stream');
    if (!isSse && !type.includes('json')) return undefined;
    if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return refuse(`a ${encoding}-encoded body cannot be read for tasks`);
    return isSse ? new SseTasks(options) : new JsonTasks(options);
  };
}

const joined = (value: string | string[] | undefined) => (Array.isArray(value) ? value.join(', ') : value);

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

const isObject = (value: unknown): value is object => typeof value === 'object' && value !== null;

/** Records created tasks and cuts task lists in a JSON-RPC payload; true when it changed. */
function readPayload(text: string, options: TasksAnswerOptions): unknown {
  let payload: unknown;
  try {
    payload = parseStrictJson(text, { maxDepth: MAX_ANSWER_DEPTH });
  } catch (err) {
    throw new Error(`the answer cannot be read one way only: ${(err as Error).message}`);
  }
  let changed = false;
  for (const message of Array.isArray(payload) ? payload : [payload]) {
    if (!isObject(message)) continue;
    const result = members(message, MESSAGE_MEMBERS, 'a message').result;
    if (!isObject(result)) continue;
    const { task, tasks } = members(result, RESULT_MEMBERS, 'a result');
    if (options.created && isObject(task)) {
      const { taskId, ttl } = members(task, TASK_MEMBERS, 'a task');
      if (typeof taskId === 'string') options.created(taskId, ttl);
    }
    if (options.ownIds && Array.isArray(tasks)) changed = keepOwn(result as { tasks: unknown[] }, options.ownIds) || changed;
  }
  return changed ? payload : undefined;
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

/** application/json: one response (or batch), held whole, bounded. */
class JsonTasks implements BodyTransform {
  readonly perCaller: boolean;
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly options: TasksAnswerOptions) {
    this.perCaller = options.ownIds !== undefined;
  }

  push(chunk: Buffer): Buffer {
    this.size += chunk.length;
    if (this.size > this.options.maxBytes) throw new Error(`a JSON answer exceeds ${this.options.maxBytes} bytes`);
    this.chunks.push(chunk);
    return EMPTY;
  }

  end(): Buffer {
    const body = Buffer.concat(this.chunks, this.size);
    const text = body.toString('utf8');
    if (body.length === 0 || !MIGHT_HOLD_TASKS.test(text)) return body;
    const changed = readPayload(text, this.options);
    return changed === undefined ? body : Buffer.from(JSON.stringify(changed), 'utf8');
  }
}

/** text/event-stream: each whole `message` event read, rewritten when it held another principal's task. */
class SseTasks implements BodyTransform {
  readonly perCaller: boolean;
  private readonly splitter: SseEventSplitter;
  private first = true;

  constructor(private readonly options: TasksAnswerOptions) {
    this.perCaller = options.ownIds !== undefined;
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
    if ((event.type !== '' && event.type !== 'message') || event.data === undefined) return raw;
    if (!MIGHT_HOLD_TASKS.test(event.data)) return raw;
    const changed = readPayload(event.data, this.options);
    if (changed === undefined) return raw;
    event.data = JSON.stringify(changed);
    return formatSseEvent(event);
  }
}
