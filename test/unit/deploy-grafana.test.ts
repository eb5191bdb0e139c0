/**
 * deploy/grafana/mcp-auth-gateway.json: every metric a panel queries is one
 * the gateway registers (src/observability/metrics.ts, with Node's default
 * metrics under the same prefix), and every label it filters or groups by is
 * one that metric has — so a renamed metric or label breaks this test, not
 * the dashboard in production.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/observability/metrics.js';

const REPO = resolve(import.meta.dirname, '../..');

interface Panel {
  type: string;
  title: string;
  targets?: Array<{ expr: string }>;
}
const dashboard = JSON.parse(readFileSync(join(REPO, 'deploy/grafana/mcp-auth-gateway.json'), 'utf8')) as {
  uid: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; query?: unknown; definition?: string }> };
};

/** Labels Prometheus adds when it scrapes (Kubernetes service discovery), and `le` of histogram buckets. */
const SCRAPE_LABELS = new Set(['pod', 'namespace', 'instance', 'job', 'le']);
const HISTOGRAM_SUFFIXES = /_(bucket|sum|count)$/;

const registry = new Metrics().registry;

function metric(name: string): { type: string; labelNames: string[] } | undefined {
  const shape = (m: unknown) => {
    const { type, labelNames } = m as { type: string; labelNames?: string[] };
    return { type, labelNames: labelNames ?? [] };
  };
  const direct = registry.getSingleMetric(name);
  if (direct) return shape(direct);
  // A _bucket/_sum/_count suffix names a histogram's series; on anything else it is a typo.
  const base = registry.getSingleMetric(name.replace(HISTOGRAM_SUFFIXES, ''));
  return base && shape(base).type === 'histogram' ? shape(base) : undefined;
}

const expressions = [
  ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr }))),
  ...dashboard.templating.list.filter((v) => v.definition).map((v) => ({ panel: `variable ${v.name}`, expr: v.definition! })),
];

describe('the Grafana dashboard', () => {
  it('is a dashboard with queries', () => {
    expect(dashboard.uid).toBe('mcp-auth-gateway');
    expect(expressions.length).toBeGreaterThan(10);
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
  });

  it('queries only metrics the gateway registers, with labels they have', () => {
    const problems: string[] = [];
    const used = new Set<string>();
    for (const { panel, expr } of expressions) {
      // Each selector: a metric name, optionally with {label matchers}.
      for (const m of expr.matchAll(/\b(mag_[a-z0-9_]+)(\{([^}]*)\})?/g)) {
        const name = m[1]!;
        used.add(name.replace(HISTOGRAM_SUFFIXES, ''));
        const found = metric(name);
        if (!found) {
          problems.push(`${panel}: ${name} is not registered`);
          continue;
        }
        const matchers = [...(m[3] ?? '').matchAll(/([a-z_]+)\s*(=~|!~|!=|=)/g)].map((l) => l[1]!);
        const groupBy = [...expr.matchAll(/\bby\s*\(([^)]*)\)/g)].flatMap((g) => g[1]!.split(',').map((l) => l.trim()));
        for (const label of [...matchers, ...groupBy]) {
          if (!SCRAPE_LABELS.has(label) && !found.labelNames.includes(label)) problems.push(`${panel}: ${name} has no label "${label}"`);
        }
      }
    }
    expect(problems).toEqual([]);
    // The gateway's own metrics are all on the dashboard, the store's included.
    for (const own of [
      'mag_requests_total',
      'mag_request_duration_seconds',
      'mag_upstream_errors_total',
      'mag_open_streams',
      'mag_token_cache_total',
      'mag_store_operation_duration_seconds',
      'mag_store_errors_total',
      // Rate limits (routes and the built-in AS) and the built-in AS's counters (issue 15).
      'mag_route_rate_limited_total',
      'mag_route_rate_limit_fail_open_total',
      'mag_rate_limited_total',
      'mag_rate_limit_fail_open_total',
      'mag_tokens_issued_total',
      'mag_token_errors_total',
      'mag_consent_decisions_total',
      'mag_grants_revoked_total',
      'mag_revocation_syncs_total',
      'mag_revocation_last_read_timestamp_seconds',
    ]) {
      expect(used).toContain(own);
    }
  });

  it('the check itself catches a metric or label that does not exist', () => {
    expect(metric('mag_requests_totl')).toBeUndefined();
    expect(metric('mag_requests_total_bucket')).toBeUndefined(); // a counter has no buckets
    expect(metric('mag_request_duration_seconds_bucket')?.type).toBe('histogram');
    expect(metric('mag_store_errors_total')?.labelNames).toEqual(['backend', 'operation', 'kind']);
  });
});
