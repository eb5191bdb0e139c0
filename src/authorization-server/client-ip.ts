// The client's IP address for rate limits: the socket peer, or with
// trust_proxy the address the trusted hop appended to X-Forwarded-For.
import type { Context } from 'hono';
import type { HttpBindings } from '@hono/node-server';

export function clientIp(c: Context, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = c.req.header('x-forwarded-for');
    const last = forwarded?.split(',').at(-1)?.trim();
    if (last) return last;
  }
  return (c.env as Partial<HttpBindings> | undefined)?.incoming?.socket.remoteAddress ?? 'unknown';
}
