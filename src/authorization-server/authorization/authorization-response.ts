// The redirect back to the client: exactly one `code` (or `error`), `state`
// exactly as received, and `iss` (RFC 9207) — on success and on error alike.
// Registered redirect URIs never carry these parameters, so each appears once.

export type AuthorizationResult = { code: string } | { error: string; description?: string };

export function authorizationRedirectUrl(redirectUri: string, result: AuthorizationResult, state: string | undefined, issuer: string): string {
  const url = new URL(redirectUri);
  if ('code' in result) url.searchParams.set('code', result.code);
  else {
    url.searchParams.set('error', result.error);
    if (result.description) url.searchParams.set('error_description', result.description);
  }
  if (state !== undefined) url.searchParams.set('state', state);
  url.searchParams.set('iss', issuer);
  return url.href;
}
