/**
 * Real JSON readers of other ecosystems, as long-running processes: Python's
 * `json` (dict access) and Go's `encoding/json` (struct decoding), from
 * test/security/fixtures/json-readers/. Each reads one base64 body per line and
 * answers one JSON line with what a server built on it would see. Used to check
 * that whatever the gateway forwards means the same to all of them.
 */
import { NAME_MEMBER, idKey, idOf, type JsonRpcMessage, type ParsedRequest } from '../../src/policy/json-rpc.js';
import { startReaders, type ReaderPair, type ReaderProcess } from './reader-processes.js';

const FIXTURES = new URL('../security/fixtures/json-readers/', import.meta.url);

/** What one reader sees in one message; `id` as that reader would echo it (JSON text), null when absent. */
export interface ReaderMessage {
  method: string | null;
  name: string | null;
  uri: string | null;
  id: string | null;
}

export interface ReaderAnswer {
  ok: boolean;
  error?: string;
  batch: boolean;
  messages: ReaderMessage[];
}

export type JsonReader = ReaderProcess<Buffer, ReaderAnswer>;

/** Python's json and, when `go` is on PATH, Go's encoding/json; each is sent one base64 body per line. */
export function startJsonReaders(): Promise<ReaderPair<Buffer, ReaderAnswer>> {
  const answer = (raw: Record<string, unknown>) => raw as unknown as ReaderAnswer;
  return startReaders(FIXTURES, (body: Buffer) => body.toString('base64'), { name: 'python json', decode: answer }, { name: 'go encoding/json', decode: answer });
}

/** What the gateway judged in each message, in the readers' terms. */
export function gatewayReading(request: ParsedRequest): ReaderMessage[] {
  return request.messages.map((message: JsonRpcMessage) => {
    const method = typeof message.method === 'string' ? message.method : null;
    const member = method === null ? undefined : NAME_MEMBER[method];
    const params = (typeof message.params === 'object' && message.params !== null ? message.params : {}) as Record<string, unknown>;
    const id = idOf(message);
    return {
      method,
      name: member === 'name' ? (params.name as string) : null,
      uri: member === 'uri' ? (params.uri as string) : null,
      id: 'id' in message && id !== undefined ? idKey(id) : null,
    };
  });
}

/**
 * A reader's view reduced to what the gateway judges: the method, the name
 * the method carries (Go reads "" for a missing string), and the id by type
 * and value (as idKey compares them).
 */
export function comparable(answer: ReaderAnswer): ReaderMessage[] {
  return answer.messages.map((m) => {
    const method = m.method === '' ? null : m.method;
    const member = method === null ? undefined : NAME_MEMBER[method];
    return {
      method,
      name: member === 'name' ? m.name : null,
      uri: member === 'uri' ? m.uri : null,
      id: m.id === null ? null : idText(m.id),
    };
  });
}

/** An id's JSON text by type and value; text no JSON reader here takes (Python's `Infinity`) stays apart. */
function idText(text: string): string {
  try {
    return idKey(JSON.parse(text) as string | number | null);
  } catch {
    return `raw:${text}`;
  }
}
