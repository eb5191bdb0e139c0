/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
// Sends one of the AS's pages with the page security headers.
import type { Context } from 'hono';
import { StoreUnavailableError } from '../../store/store.js';
import { ErrorPage } from './error-page.js';
import { PAGE_HEADERS } from './security-headers.js';

export async function errorPage(c: Context, status: 400 | 403 | 503, title: string, message: string): Promise<Response> {
  return c.html(<ErrorPage title={title} message={message} />, status, PAGE_HEADERS);
}

/** A browser page whose handler fails on the store: a page saying so, not JSON. */
export async function guarded(c: Context, handler: () => Promise<Response>): Promise<Response> {
  try {
    return await handler();
  } catch (err) {
    if (err instanceof StoreUnavailableError) return errorPage(c, 503, 'Temporarily unavailable', 'The server cannot complete this request right now. Try again in a moment.');
    throw err;
  }
}
