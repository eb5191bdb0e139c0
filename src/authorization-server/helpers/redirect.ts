import type { Context } from 'hono';

/** 303 after a form post (302 after a GET): the browser follows with a GET; the code is never cached or sent as a referrer. */
export function redirect(c: Context, location: string): Response {
  c.header('cache-control', 'no-store');
  c.header('referrer-policy', 'no-referrer');
  return c.redirect(location, c.req.method === 'POST' ? 303 : 302);
}
