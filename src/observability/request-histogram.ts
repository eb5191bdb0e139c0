// A Prometheus histogram for the request path. prom-client's observe() hashes
// and validates its labels on every call; here a label set is bound once and
// observe() is a bucket search and three additions. It is read through the
// same registry as every other metric, in prom-client's histogram format.
import type { Metric, Registry } from 'prom-client';

interface HistogramConfig<Label extends string> {
  name: string;
  help: string;
  labelNames: readonly Label[];
  /** Upper bounds, ascending; `+Inf` is implied. */
  buckets: readonly number[];
  registers: Registry[];
}

/** One label set: what observe() counts into. */
export class HistogramSeries {
  /** Per bucket (not cumulative); the last one is `+Inf`. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const { bounds } = this;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i += 1;
    this.counts[i]! += 1;
    this.sum += value;
    this.count += 1;
  }
}

interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

export class RequestHistogram<Label extends string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly labelNames: readonly Label[];
  private readonly bounds: readonly number[];
  private readonly series = new Map<string, HistogramSeries>();

  constructor(config: HistogramConfig<Label>) {
    this.name = config.name;
    this.help = config.help;
    this.labelNames = config.labelNames;
    this.bounds = [...config.buckets];
    for (let i = 1; i < this.bounds.length; i += 1) {
      if (!(this.bounds[i]! > this.bounds[i - 1]!)) throw new Error(`${config.name}: buckets must be ascending`);
    }
    for (const registry of config.registers) registry.registerMetric(this as unknown as Metric);
  }

  /** The series of these label values, in labelNames order: look it up once and keep it. */
  labels(...values: string[]): HistogramSeries {
    if (values.length !== this.labelNames.length) throw new Error(`${this.name}: expected ${this.labelNames.length} label values`);
    const key = JSON.stringify(values);
    let series = this.series.get(key);
    if (series === undefined) {
      const labels = Object.fromEntries(this.labelNames.map((name, i) => [name, values[i]!]));
      series = new HistogramSeries(labels, this.bounds);
      this.series.set(key, series);
    }
    return series;
  }

  reset(): void {
    for (const series of this.series.values()) {
      series.counts.fill(0);
      series.sum = 0;
      series.count = 0;
    }
  }

  /** What the registry renders: cumulative `_bucket`s with `le`, then `_sum` and `_count`, per series. */
  async get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: MetricValue[] }> {
    const values: MetricValue[] = [];
    for (const series of this.series.values()) {
      if (series.count === 0) continue;
      let cumulative = 0;
      this.bounds.forEach((bound, i) => {
        cumulative += series.counts[i]!;
        values.push({ labels: { le: bound, ...series.labels }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { le: '+Inf', ...series.labels }, value: series.count, metricName: `${this.name}_bucket` });
      values.push({ labels: { ...series.labels }, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...series.labels }, value: series.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
