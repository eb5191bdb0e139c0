// The gateway's own client ID metadata document at a route's upstream AS
// (draft-ietf-oauth-client-id-metadata-document; MCP's preferred client
// identification): served at a URL of the gateway, that URL is the client_id.
// Used where the AS advertises `client_id_metadata_document_supported` and the
// URL is https (the draft requires it), before dynamic registration. A public
// client: the document may carry no secret.

export const UPSTREAM_CLIENT_NAME = 'MCP auth gateway';

/** The document served at `documentUrl` for the route whose one callback is `redirectUri`. */
export function upstreamClientDocument(documentUrl: string, redirectUri: string): Record<string, unknown> {
  return {
    client_id: documentUrl,
    client_name: UPSTREAM_CLIENT_NAME,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
}

/** Whether the AS takes this document's URL as a client_id: it says so, and the URL is https. */
export function clientDocumentUsable(server: object, documentUrl: string): boolean {
  return (server as { client_id_metadata_document_supported?: unknown }).client_id_metadata_document_supported === true && new URL(documentUrl).protocol === 'https:';
}
