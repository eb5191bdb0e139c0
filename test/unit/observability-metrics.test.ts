import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/observability/metrics.js';

const line = (text: string, prefix: string) => text.split('\n').find((l) => l.startsWith(prefix));

describe('tallied counters', () => {
  it('reach /metrics as prom-client counters, and keep adding up across scrapes', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const ok = metrics.requestTally.count({ route: '/mcp', status: '200', decision: 'allow' });
    const denied = metrics.requestTally.count({ route: '/mcp', status: '403', decision: 'deny' });
    ok.inc();
    ok.inc();
    denied.inc();
    let text = await metrics.registry.metrics();
    expect(line(text, 'mag_requests_total{route="/mcp",status="200",decision="allow"}')).toMatch(/ 2$/);
    expect(line(text, 'mag_requests_total{route="/mcp",status="403",decision="deny"}')).toMatch(/ 1$/);
    ok.inc();
    text = await metrics.registry.metrics();
    expect(line(text, 'mag_requests_total{route="/mcp",status="200",decision="allow"}')).toMatch(/ 3$/);
    expect(line(text, 'mag_requests_total{route="/mcp",status="403",decision="deny"}')).toMatch(/ 1$/);
  });

  it('hands out one count per label set, and shows none that was never counted', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const hits = metrics.tokenCacheTally.count({ result: 'hit' });
    expect(metrics.tokenCacheTally.count({ result: 'hit' })).toBe(hits);
    metrics.tokenCacheTally.count({ result: 'miss' });
    hits.inc();
    const values = (await metrics.tokenCache.get()).values;
    expect(values).toEqual([expect.objectContaining({ labels: { result: 'hit' }, value: 1 })]);
  });
});
