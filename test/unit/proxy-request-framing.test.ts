// [J53] Framing judged before routing: Transfer-Encoding exists only in HTTP/1.1 (RFC 9112 §6.1).
import { describe, expect, it } from 'vitest';
import { checkRequestFraming } from '../../src/proxy/request-framing.js';
import { GatewayError } from '../../src/errors/gateway-error.js';

const request = (version: string, rawHeaders: string[] = []) => {
  const [major, minor] = version.split('.').map(Number) as [number, number];
  return { httpVersionMajor: major, httpVersionMinor: minor, rawHeaders };
};

function refusal(version: string, rawHeaders: string[] = []): GatewayError | undefined {
  try {
    checkRequestFraming(request(version, rawHeaders));
    return undefined;
  } catch (err) {
    return err as GatewayError;
  }
}

describe('checkRequestFraming', () => {
  it.each([
    ['chunked'], ['CHUNKED'], ['gzip, chunked'], ['identity'], [''], ['chunked, identity'], ['x'],
  ])('[J53] HTTP/1.0 with Transfer-Encoding: %j → 400, whatever the value', (value) => {
    for (const name of ['Transfer-Encoding', 'transfer-encoding', 'TRANSFER-ENCODING', 'tRaNsFeR-eNcOdInG']) {
      expect(refusal('1.0', ['Host', 'x', name, value, 'Content-Length', '2'])).toMatchObject({ status: 400, code: 'invalid_request' });
    }
  });

  it('[J53] HTTP/1.0 without Transfer-Encoding passes, Content-Length or not; names that only look alike are not it', () => {
    expect(refusal('1.0', ['Host', 'x', 'Content-Length', '2'])).toBeUndefined();
    expect(refusal('1.0', ['Host', 'x', 'Transfer_Encoding', 'chunked', 'Transfer-Encodings', 'chunked', 'TE', 'trailers'])).toBeUndefined();
  });

  it('[J53] HTTP/1.1 keeps its Transfer-Encoding (Node judges the value)', () => {
    expect(refusal('1.1', ['Host', 'x', 'Transfer-Encoding', 'chunked'])).toBeUndefined();
  });

  it.each([['0.9'], ['2.0'], ['1.2'], ['3.0']])('[J53] HTTP/%s is not served: 505, with or without a body', (version) => {
    expect(refusal(version, ['Host', 'x'])).toMatchObject({ status: 505, code: 'http_version_not_supported' });
    expect(refusal(version, ['Host', 'x', 'Transfer-Encoding', 'chunked'])).toMatchObject({ status: 505 });
  });
});
