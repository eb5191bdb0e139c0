// Bounded JSON GET for configured metadata and key URLs: a time limit, a size
// limit, and no redirects (SECURITY-CASES C.13: configured fetches do not
// follow redirects blindly).

export interface FetchJsonOptions {
  timeoutMs: number;
  maxBytes: number;
  /** An extra abort signal (e.g. jose's own timeout). */
  signal?: AbortSignal;
}

export async function fetchJson(url: string, options: FetchJsonOptions): Promise<unknown> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  const response = await fetch(url, { redirect: 'error', signal, headers: { accept: 'application/json' } });
  if (response.status !== 200) {
    await response.body?.cancel();
    throw new Error(`${url} answered HTTP ${response.status}`);
  }
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > options.maxBytes) {
    await response.body?.cancel();
    throw new Error(`${url} answered more than ${options.maxBytes} bytes`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body ?? []) {
    size += chunk.byteLength;
    if (size > options.maxBytes) throw new Error(`${url} answered more than ${options.maxBytes} bytes`);
    chunks.push(chunk);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}
