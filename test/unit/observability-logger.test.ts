import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';

/** The JSON line pino writes for one object. */
function logged(fields: Record<string, unknown>): Record<string, unknown> {
  const lines: string[] = [];
  const sink = new Writable({ write: (chunk: Buffer, _e, cb) => (lines.push(chunk.toString()), cb()) });
  createLogger('info', sink).info(fields, 'line');
  return JSON.parse(lines[0] ?? '{}') as Record<string, unknown>;
}

describe('log redaction', () => {
  it.each(['ECONNREFUSED', 'ENOTFOUND', 'ETIMEDOUT', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT', 'ERR_TLS_CERT_ALTNAME_INVALID', 'CERT_HAS_EXPIRED'])(
    'keeps the network error code %s readable, at the top and nested',
    (code) => {
      expect(logged({ code }).code).toBe(code);
      expect((logged({ err: { code } }).err as { code: string }).code).toBe(code);
    },
  );

  it.each(['SplxlOBeZQQYbYS6WxSbIA', 'abc', 'ABCDEFGH', 'EABCDEFGH', 'A1_B2', `${'A_'.repeat(30)}A`])('redacts a code shaped like a secret: %s', (code) => {
    expect(logged({ code }).code).toBe('[redacted]');
    expect((logged({ query: { code } }).query as { code: string }).code).toBe('[redacted]');
  });

  it('redacts every other secret key whatever its value', () => {
    const line = logged({ token: 'ECONNREFUSED', client_secret: 'ERR_X_Y', headers: { authorization: 'Bearer x' } });
    expect(line.token).toBe('[redacted]');
    expect(line.client_secret).toBe('[redacted]');
    expect((line.headers as { authorization: string }).authorization).toBe('[redacted]');
  });
});
