/**
 * A user agent without a page engine, for flows a test walks one request at
 * a time: a cookie jar per host:port, redirects returned rather than followed,
 * every response kept in order. (followAuthorization in mcp-client.ts walks a
 * whole authorization instead.)
 */

export interface Seen {
  url: string;
  status: number;
  location: string | null;
  headers: Headers;
  body: string;
}

export class CookieBrowser {
  /** host:port → cookie name → value. */
  readonly jars = new Map<string, Map<string, string>>();
  /** Every response it got, in order. */
  readonly seen: Seen[] = [];

  /** Every redirect it was sent, resolved against the URL that sent it, in order. */
  get locations(): URL[] {
    return this.seen.filter((s) => s.location !== null).map((s) => new URL(s.location!, s.url));
  }

  /** `headers` are sent as well (e.g. the Fetch metadata a browser adds to a form post). */
  async request(url: string | URL, init: { method?: string; body?: URLSearchParams; headers?: Record<string, string> } = {}): Promise<Seen> {
    const target = new URL(url);
    const jar = this.jars.get(target.host) ?? new Map<string, string>();
    this.jars.set(target.host, jar);
    const res = await fetch(target, {
      method: init.method ?? 'GET',
      body: init.body,
      redirect: 'manual',
      headers: { ...init.headers, cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') },
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    const seen = { url: target.href, status: res.status, location: res.headers.get('location'), headers: res.headers, body: await res.text() };
    this.seen.push(seen);
    return seen;
  }
}
