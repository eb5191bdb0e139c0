// The `endpoint` event of a legacy upstream names where the gateway POSTs a
// session's messages. It is pinned to the configured SSE URL's origin (same
// scheme, host and port; a relative URL resolves against the SSE URL), so an
// upstream, or whoever can write into its stream, cannot send the gateway's
// credential and the clients' messages to another host (SECURITY).

/** The endpoint's path and query on the SSE URL's origin, or undefined when it names anything else. */
export function pinnedEndpoint(data: string, sseUrl: URL): string | undefined {
  const written = data.trim();
  if (written === '' || !URL.canParse(written, sseUrl.href)) return undefined;
  const url = new URL(written, sseUrl);
  // `origin` compares scheme, host and port (default ports normalised); userinfo is not part of it, so refused apart.
  if (url.origin !== sseUrl.origin || url.username !== '' || url.password !== '') return undefined;
  return url.pathname + url.search;
}
