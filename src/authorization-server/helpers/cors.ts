// Public, credential-less endpoints (metadata, JWKS, registration, token,
// revocation) are called from browser-based MCP clients on other origins.
// No cookies are involved there, so any origin may read them.
import { cors } from 'hono/cors';

export const publicCors = cors({
  origin: '*',
  allowMethods: ['GET', 'POST', 'OPTIONS'],
  // MCP-Protocol-Version: 2025-03-26 clients send it on metadata requests; DPoP: proofs at /token (RFC 9449 §5).
  allowHeaders: ['authorization', 'content-type', 'mcp-protocol-version', 'dpop'],
  // A browser client reads the nonce to retry /token (RFC 9449 §9).
  exposeHeaders: ['dpop-nonce'],
  maxAge: 86_400,
});
