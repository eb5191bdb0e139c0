/**
 * [K63] (round-3 review): a hostile legacy HTTP+SSE upstream trickles one long comment line (never an
 * event, never over max_body_bytes). The legacy reader used to re-join the held partial line with
 * each chunk and rescan it from its start (quadratic, synchronous, on the event loop every user
 * shares); it now splits with the Streamable HTTP reader's splitter (policy/sse-events.ts), which
 * holds chunks as they came and scans each byte once. Fails when the reader rescans what it holds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventStreamReader, EventTooLargeError } from '../../src/proxy/sse/event-stream-reader.js';
import { SseEventSplitter, parseSseEvent } from '../../src/policy/sse-events.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';

const PATH = '/legacy/mcp';
const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } });

let issuer: TestIssuer;
let upstream: ChildProcess;
let gw: TestGateway;

beforeAll(async () => {
  issuer = await startTestIssuer('RS256');
  upstream = spawn(process.execPath, [join(import.meta.dirname, 'review/trickle-sse-upstream.mjs'), '3000000', '400'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(upstream.stdout!, 'data')) as [Buffer];
  gw = await startTestGateway({ 'gateway.yaml': gatewayYaml(), 'legacy.yaml': jwtRoute(PATH, '', issuer, { upstream: { sse: line.toString().trim() }, limits: { upstream_timeout: '30s' } }) });
}, 30_000);

afterAll(async () => {
  upstream?.kill('SIGKILL');
  await gw?.stop();
  await issuer?.close();
});

describe('[K63] a legacy SSE upstream trickling an endless line does not stall the gateway', () => {
  it('[K63] a trickled line is refused at the push that takes it past the bound, whatever the chunk sizes (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 16, max: 4096 }), fc.array(fc.integer({ min: 1, max: 512 }), { minLength: 1, maxLength: 200 }), fc.boolean(), (bound, sizes, comment) => {
        const reader = new EventStreamReader(bound);
        let held = 0;
        for (const [i, size] of sizes.entries()) {
          const chunk = Buffer.from(`${i === 0 && comment ? ':' : ''}${'x'.repeat(size)}`);
          held += chunk.length;
          if (held > bound) {
            expect(() => reader.push(chunk)).toThrow(EventTooLargeError);
            return;
          }
          expect(reader.push(chunk)).toEqual([]);
        }
      }),
    );
  });

  it('[K63] the legacy reader and the Streamable HTTP splitter are one: the same events from the same bytes (property)', () => {
    const line = fc.string({ unit: 'grapheme-ascii' }).map((s) => s.replace(/[\r\n]/g, ''));
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom(':', 'data: ', 'event: ', 'id: '), line, fc.constantFrom('\n', '\r\n', '\r', '\n\n')), { maxLength: 20 }), (lines) => {
        const bytes = Buffer.from(lines.map(([field, value, eol]) => field + value + eol).join(''));
        const viaSplitter = new SseEventSplitter(1 << 20)
          .push(bytes)
          .map(parseSseEvent)
          .filter((e) => e.data !== undefined)
          .map((e) => ({ type: e.type || 'message', data: e.data }));
        expect(new EventStreamReader(1 << 20).push(bytes)).toEqual(viaSplitter);
      }),
    );
  });

  it('[K63] three sessions on an upstream trickling a 3 MB comment line a byte at a time: the event loop keeps turning', async () => {
    const token = await issuer.mint({ aud: resourceOf(PATH), sub: 'alice' });
    const h = monitorEventLoopDelay({ resolution: 10 });
    h.enable();
    const calls = [0, 1, 2].map(() =>
      fetch(`${gw.url}${PATH}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' }, body: INITIALIZE, signal: AbortSignal.timeout(15_000) }).catch(() => undefined),
    );
    const started = Date.now();
    const answered: number[] = [];
    while (Date.now() - started < 10_000) {
      answered.push((await fetch(`${gw.url}/healthz`)).status);
      await new Promise((r) => setTimeout(r, 100));
    }
    h.disable();
    await Promise.all(calls);
    console.log({ healthz: answered.length, loopDelayMaxMs: h.max / 1e6, loopDelayMeanMs: h.mean / 1e6 });
    expect(answered.every((s) => s === 200)).toBe(true);
    // A stall, not a speed: rescanning what is held per chunk stopped the loop for seconds at a time.
    expect(h.max / 1e6).toBeLessThan(1_000);
  }, 60_000);
});
