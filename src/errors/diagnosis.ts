// A failure whose cause the operator can fix, said once per cause with the
// configured and the seen value (what `check --online` says), rather than only
// as a generic 502/503 per request. An error carries its `diagnosis`; the
// route that answers it logs the diagnosis the first time it sees its key.

export interface Diagnosis {
  /** Stable: the kind of cause (issuer_mismatch, upstream_path, stdio_spawn). */
  cause: string;
  /** What makes two diagnoses one cause (the cause, the URLs, the status…). */
  key: string;
  /** Said to the operator: what is wrong and what to change. */
  message: string;
  /** The configured and the seen values, secrets already masked. */
  fields: Record<string, unknown>;
}

export interface Diagnosed {
  diagnosis: Diagnosis;
}

const isDiagnosed = (value: unknown): value is Diagnosed =>
  typeof value === 'object' && value !== null && typeof (value as Partial<Diagnosed>).diagnosis?.key === 'string';

/** The first diagnosis in an error's causes (`cause`, an AggregateError's `errors`), a few levels deep. */
export function findDiagnosis(err: unknown, depth = 0): Diagnosis | undefined {
  if (isDiagnosed(err)) return err.diagnosis;
  if (depth > 4 || typeof err !== 'object' || err === null) return undefined;
  const nested = [...(err instanceof AggregateError ? (err.errors as unknown[]) : []), (err as { cause?: unknown }).cause];
  for (const inner of nested) {
    const found = findDiagnosis(inner, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** Remembers which causes were said already; bounded, so a flood of distinct keys cannot grow it. */
export class SaidOnce {
  private readonly said = new Set<string>();

  constructor(private readonly max = 256) {}

  /** true the first time `key` is seen (and again after the memory was full and forgotten). */
  first(key: string): boolean {
    if (this.said.has(key)) return false;
    if (this.said.size >= this.max) this.said.clear();
    this.said.add(key);
    return true;
  }
}

/** A URL as logs may show it: no user info, and a query (which may carry a credential) reduced to `?…`. */
export function maskedUrl(url: string): string {
  if (!URL.canParse(url)) return '(a malformed URL)';
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}${u.search === '' ? '' : '?…'}`;
}
