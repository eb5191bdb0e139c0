// URL rules shared by resolution and the routes that serve metadata.

/** Canonical form of a resource or base URL (RFC 8707, MCP): lowercase scheme and host, default port dropped, no trailing slash. */
export function canonicalUrl(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}${u.search}`;
}

/** RFC 9728 §3.1: the well-known segment goes between the host and the path of the resource. */
export function resourceMetadataUrl(resource: string): string {
  const u = new URL(resource);
  return `${u.origin}/.well-known/oauth-protected-resource${u.pathname === '/' ? '' : u.pathname.replace(/\/+$/, '')}`;
}

export function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname;
  return host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** An http: URL that leaves the machine: allowed, but worth a warning. */
export function isPlainHttpRemote(url: string): boolean {
  return new URL(url).protocol === 'http:' && !isLoopbackUrl(url);
}
