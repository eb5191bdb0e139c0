import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { logClaimMismatches } from '../../src/auth/claim-mismatch.js';
import { createLogger } from '../../src/observability/logger.js';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({ write: (chunk: Buffer, _e, cb) => (lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>), cb()) });
  return { lines, logger: createLogger('debug', sink) };
}

afterEach(() => vi.useRealTimers());

describe('logClaimMismatches', () => {
  it('logs the expected and the received value at info, then at debug for a minute', () => {
    vi.useFakeTimers();
    const { lines, logger } = capture();
    const report = logClaimMismatches(logger, '/a/mcp');
    report({ claim: 'aud', expected: 'https://mcp.example.com/a/mcp', received: 'https://mcp.example.com' });
    report({ claim: 'iss', expected: 'https://idp.example.com/', received: 'https://idp.example.com' });
    vi.advanceTimersByTime(60_000);
    report({ claim: 'aud', expected: 'https://mcp.example.com/a/mcp', received: undefined });
    expect(lines.map((l) => [l.level, l.claim, l.expected, l.received])).toEqual([
      [30, 'aud', 'https://mcp.example.com/a/mcp', 'https://mcp.example.com'],
      [20, 'iss', 'https://idp.example.com/', 'https://idp.example.com'],
      [30, 'aud', 'https://mcp.example.com/a/mcp', undefined],
    ]);
    expect(lines[0]).toMatchObject({ route: '/a/mcp', msg: 'token refused: its audience is not the one this route expects' });
  });

  it('bounds what the token wrote', () => {
    const { lines, logger } = capture();
    logClaimMismatches(logger, '/a')({ claim: 'aud', expected: 'x', received: ['y'.repeat(1000), 7, ...Array(10).fill('z')] });
    const received = lines[0]?.received as string[];
    expect(received).toHaveLength(5);
    expect(received[0]).toHaveLength(200);
    expect(received[1]).toBe('(number)');
  });
});
