// Typed access to redirect-uris.json (shared by the D and E suites and the redirect-URI fuzzer).
import { readCorpus } from './corpus.js';

export interface RedirectCase<T = string> {
  uri: T;
  why?: string;
  native?: boolean;
}

export interface RedirectCorpus {
  registration: { refused: RedirectCase<unknown>[]; accepted: RedirectCase[] };
  authorize: { mismatched: RedirectCase[]; matched: RedirectCase[] };
}

export const redirectCorpus = readCorpus<RedirectCorpus>('redirect-uris.json');

/** `$loopback` → the registered loopback URI, `$port` → its port. */
export const expandRedirect = (uri: string, loopback: string): string =>
  uri.replaceAll('$loopback', loopback).replaceAll('$port', new URL(loopback).port);
