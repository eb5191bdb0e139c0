/**
 * The answer to a raw MCP POST, JSON or an event stream: on a stream, the messages that come
 * before the answers (progress, the server's requests and notifications) are pushed to `before`
 * as they arrive, and the promise resolves with the answer (or the answers of a batch) once the
 * stream ends.
 */

export interface RpcMessage {
  id?: unknown;
  method?: string;
  params?: Record<string, unknown>;
  result?: unknown;
  error?: unknown;
}

/** The `data` of each complete event in `text`, and what is left of it. */
export function sseData(text: string): { data: string[]; rest: string } {
  const data: string[] = [];
  let rest = text.replaceAll('\r\n', '\n');
  for (let cut = rest.indexOf('\n\n'); cut >= 0; cut = rest.indexOf('\n\n')) {
    const lines = rest.slice(0, cut).split('\n').filter((l) => l.startsWith('data:'));
    rest = rest.slice(cut + 2);
    if (lines.length > 0) data.push(lines.map((l) => l.slice(5).replace(/^ /, '')).join('\n'));
  }
  return { data, rest };
}

export async function readPostAnswer(res: Response, before: RpcMessage[]): Promise<RpcMessage | RpcMessage[]> {
  if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) return (await res.json()) as RpcMessage | RpcMessage[];
  const answers: RpcMessage[] = [];
  let text = '';
  for await (const chunk of res.body!) {
    const read = sseData(text + Buffer.from(chunk).toString('utf8'));
    text = read.rest;
    for (const data of read.data) {
      const message = JSON.parse(data) as RpcMessage;
      if (typeof message.method === 'string') before.push(message);
      else answers.push(message);
    }
  }
  return answers.length === 1 ? answers[0]! : answers;
}
