import { describe, expect, it } from 'vitest';
import { Histogram, Registry } from 'prom-client';
import { Metrics } from '../../src/observability/metrics.js';
import { RequestHistogram } from '../../src/observability/request-histogram.js';

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

describe('RequestHistogram', () => {
  it('renders exactly as a prom-client histogram given the same observations', async () => {
    const buckets = [0.001, 0.01, 0.1, 1];
    const config = { name: 'h_seconds', help: 'help text', labelNames: ['route'] as const, buckets };
    const [ours, theirs] = [new Registry(), new Registry()];
    const fast = new RequestHistogram({ ...config, registers: [ours] });
    const reference = new Histogram({ ...config, registers: [theirs] });
    const observations: [string, number][] = [['/a', 0.0005], ['/a', 0.001], ['/a', 0.05], ['/b', 3], ['/a', 0.2], ['/b', 0.01]];
    for (const [route, value] of observations) {
      fast.labels(route).observe(value);
      reference.labels(route).observe(value);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    fast.reset();
    expect(await ours.metrics()).not.toContain('h_seconds_count');
  });

  it('binds one series per label set', () => {
    const histogram = new RequestHistogram({ name: 'x', help: 'x', labelNames: ['route'], buckets: [1], registers: [] });
    expect(histogram.labels('/a')).toBe(histogram.labels('/a'));
    expect(histogram.labels('/b')).not.toBe(histogram.labels('/a'));
    expect(() => histogram.labels()).toThrow();
  });
});
