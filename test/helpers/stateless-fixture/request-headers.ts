// The fixture's server validation of the 2026-07-28 request headers
// (basic/transports/streamable-http, "Standard Request Headers", "Value
// Encoding", "Server Validation"): `Mcp-Method` on every request, `Mcp-Name`
// on the methods that name something, and the `Mcp-Param-*` headers of the
// tool it annotates itself, each equal to the body after decoding. Written
// from the text, independently of the gateway's src/policy/mcp-headers.ts, so
// the two can be compared.
import type { IncomingMessage } from 'node:http';
import { headerMismatch, type Json } from './rpc.js';

const NAMED_BY: Readonly<Record<string, 'name' | 'uri'>> = { 'tools/call': 'name', 'resources/read': 'uri', 'prompts/get': 'name' };

/** The tool whose argument `region` is mirrored in `Mcp-Param-Region` (the conformance suite looks for one). */
export const CUSTOM_HEADER_TOOL: Json = {
  name: 'test_custom_headers',
  description: 'Echoes its region; the region travels in the Mcp-Param-Region header too',
  inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } }, required: ['region'] },
};

const SENTINEL = /^=\?base64\?([\s\S]*)\?=$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const VISIBLE = /^[\x20-\x7e\t]*$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The value a header stands for: the sentinel form decoded, anything else literal; undefined when invalid. */
export function decodeValue(raw: string): string | undefined {
  const encoded = SENTINEL.exec(raw)?.[1];
  if (encoded === undefined) return VISIBLE.test(raw) ? raw : undefined;
  if (!BASE64.test(encoded)) return undefined;
  try {
    return utf8.decode(Buffer.from(encoded, 'base64'));
  } catch {
    return undefined;
  }
}

const single = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
};

/** Throws -32020 (400) when a request's routing headers are missing or disagree with the body. */
export function checkRequestHeaders(req: IncomingMessage, message: Json): void {
  if (message.id === undefined) return; // the revision defines no headers for notifications
  const method = String(message.method);
  const header = single(req, 'mcp-method');
  if (header === undefined) throw headerMismatch('Missing Mcp-Method header');
  if (header !== method) throw headerMismatch(`Mcp-Method header '${header}' does not match body method '${method}'`);
  const member = NAMED_BY[method];
  if (member === undefined) return;
  const params = (message.params ?? {}) as Json;
  const raw = single(req, 'mcp-name');
  if (raw === undefined) throw headerMismatch('Missing Mcp-Name header');
  const name = decodeValue(raw);
  if (name === undefined) throw headerMismatch('Mcp-Name header holds invalid characters');
  if (name !== params[member]) throw headerMismatch(`Mcp-Name header does not match params.${member}`);
  if (method === 'tools/call' && params.name === CUSTOM_HEADER_TOOL.name) checkRegionHeader(req, params);
}

function checkRegionHeader(req: IncomingMessage, params: Json): void {
  const region = ((params.arguments ?? {}) as Json).region;
  const raw = single(req, 'mcp-param-region');
  if (region === undefined || region === null) {
    if (raw !== undefined) throw headerMismatch('Mcp-Param-Region present without a region in the body');
    return;
  }
  if (raw === undefined) throw headerMismatch('Missing Mcp-Param-Region header while the body has a region');
  const value = decodeValue(raw);
  if (value === undefined) throw headerMismatch('Mcp-Param-Region holds invalid characters or invalid Base64');
  if (value !== String(region)) throw headerMismatch('Mcp-Param-Region does not match arguments.region');
}
