/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
// Sends one of the AS's pages with the page security headers.
import type { Context } from 'hono';
import { toGatewayError } from '../../errors/translate.js';
import { ErrorPage } from './error-page.js';
import { PAGE_HEADERS } from './security-headers.js';

export async function errorPage(c: Context, status: 400 | 403 | 404 | 502 | 503, title: string, message: string): Promise<Response> {
  return c.html(<ErrorPage title={title} message={message} />, status, PAGE_HEADERS);
}

/**
 * A browser page whose handler fails with what the translator calls
 * temporarily unavailable (the store, down): a page saying so, not JSON.
 * Anything else goes on to the authorization server's JSON error handler.
 */
export async function guarded(c: Context, handler: () => Promise<Response>): Promise<Response> {
  try {
    return await handler();
  } catch (err) {
    if (toGatewayError(err).code !== 'temporarily_unavailable') throw err;
    return errorPage(c, 503, 'Temporarily unavailable', 'The server cannot complete this request right now. Try again in a moment.');
  }
}
