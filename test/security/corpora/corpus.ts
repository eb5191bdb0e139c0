// Reads one JSON corpus of this folder: the one loader the security suites and fuzzers share.
import { readFileSync } from 'node:fs';

/** `file` (a name in test/security/corpora) parsed as `T`. */
export function readCorpus<T>(file: string): T {
  return JSON.parse(readFileSync(new URL(`./${file}`, import.meta.url), 'utf8')) as T;
}
