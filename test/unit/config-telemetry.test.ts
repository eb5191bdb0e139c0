// telemetry.traces and the OTEL_* variables (config/telemetry.ts): where spans go, how they are
// sampled, and that a bad variable is an issue naming the variable, never repeating its value.
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { describeRoutes } from '../../src/config/describe.js';
import { loadConfig } from '../../src/config/load.js';
import { resolveTraces } from '../../src/config/telemetry.js';

const file = (traces: { otlp_endpoint?: string; sample_ratio?: number }) => ({ sample_ratio: 1, ...traces });

describe('resolveTraces', () => {
  it('no endpoint anywhere: tracing off, whatever else is set', () => {
    expect(resolveTraces(undefined, {})).toEqual({ issues: [] });
    expect(resolveTraces(file({ sample_ratio: 0.5 }), { OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' })).toEqual({ issues: [] });
  });

  it('otlp_endpoint is a base URL: /v1/traces is appended, with or without a trailing slash', () => {
    expect(resolveTraces(file({ otlp_endpoint: 'http://otel-collector:4318' }), {}).traces).toEqual({
      url: 'http://otel-collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      sampleRatio: 1,
      parentBased: false,
      serviceName: 'mcp-auth-gateway',
      exportTimeoutMs: 10_000,
    });
    expect(resolveTraces(file({ otlp_endpoint: 'https://c.example/otlp/' }), {}).traces?.url).toBe('https://c.example/otlp/v1/traces');
  });

  it('the variables win over the file; the traces endpoint is taken as is', () => {
    const base = file({ otlp_endpoint: 'http://from-file:4318', sample_ratio: 0.25 });
    expect(resolveTraces(base, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://from-env:4318' }).traces?.url).toBe('http://from-env:4318/v1/traces');
    const whole = resolveTraces(base, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://from-env:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:9999/custom' });
    expect(whole.traces?.url).toBe('http://traces:9999/custom');
    expect(whole.traces?.sampleRatio).toBe(0.25);
  });

  it('protocol, headers, timeout and service name from the standard variables', () => {
    const { traces, issues } = resolveTraces(undefined, {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'Authorization=Basic%20abc%3D,x-tenant=a',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-tenant=b',
      OTEL_EXPORTER_OTLP_TIMEOUT: '2500',
      OTEL_SERVICE_NAME: 'edge-gateway',
    });
    expect(issues).toEqual([]);
    expect(traces).toMatchObject({ protocol: 'http/json', headers: { authorization: 'Basic abc=', 'x-tenant': 'b' }, exportTimeoutMs: 2500, serviceName: 'edge-gateway' });
  });

  it('samplers: the ratio of the file unless OTEL_TRACES_SAMPLER says otherwise; parentbased_* follows the client flag', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    const sampling = (more: Record<string, string>, ratio = 0.5) => {
      const { traces } = resolveTraces(file({ sample_ratio: ratio }), { ...env, ...more });
      return traces && { ratio: traces.sampleRatio, parent: traces.parentBased };
    };
    expect(sampling({})).toEqual({ ratio: 0.5, parent: false });
    expect(sampling({ OTEL_TRACES_SAMPLER: 'always_off' })).toEqual({ ratio: 0, parent: false });
    expect(sampling({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' })).toEqual({ ratio: 0.1, parent: false });
    expect(sampling({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio' })).toEqual({ ratio: 1, parent: true });
    expect(sampling({ OTEL_TRACES_SAMPLER: 'PARENTBASED_ALWAYS_OFF' })).toEqual({ ratio: 0, parent: true });
  });

  it('OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none: off even with an endpoint', () => {
    const base = file({ otlp_endpoint: 'http://c:4318' });
    expect(resolveTraces(base, { OTEL_SDK_DISABLED: 'true' }).traces).toBeUndefined();
    expect(resolveTraces(base, { OTEL_TRACES_EXPORTER: 'none' }).traces).toBeUndefined();
    expect(resolveTraces(base, { OTEL_SDK_DISABLED: 'false' }).traces).toBeDefined();
  });

  it('a bad variable is an issue naming it; the message never repeats the value', () => {
    const secret = 'hunter2-secret';
    const cases: Array<[Record<string, string>, string]> = [
      [{ OTEL_EXPORTER_OTLP_ENDPOINT: `ftp://user:${secret}@c` }, 'OTEL_EXPORTER_OTLP_ENDPOINT'],
      [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `not a url ${secret}` }, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'],
      [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'OTEL_EXPORTER_OTLP_PROTOCOL'],
      [{ OTEL_EXPORTER_OTLP_HEADERS: `authorization` }, 'OTEL_EXPORTER_OTLP_HEADERS'],
      [{ OTEL_EXPORTER_OTLP_HEADERS: `x-key=${secret}%0d%0aInjected: 1` }, 'OTEL_EXPORTER_OTLP_HEADERS'],
      [{ OTEL_EXPORTER_OTLP_HEADERS: `x-key=%E0%A4%A${secret}` }, 'OTEL_EXPORTER_OTLP_HEADERS'],
      [{ OTEL_EXPORTER_OTLP_TIMEOUT: '10s' }, 'OTEL_EXPORTER_OTLP_TIMEOUT'],
      [{ OTEL_TRACES_SAMPLER: 'jaeger_remote' }, 'OTEL_TRACES_SAMPLER'],
      [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' }, 'OTEL_TRACES_SAMPLER_ARG'],
      [{ OTEL_TRACES_EXPORTER: 'zipkin' }, 'OTEL_TRACES_EXPORTER'],
    ];
    for (const [env, name] of cases) {
      const { traces, issues } = resolveTraces(file({ otlp_endpoint: 'http://c:4318' }), env);
      expect(traces, name).toBeUndefined();
      expect(issues.map((i) => i.file), name).toEqual([`env:${name}`]);
      expect(JSON.stringify(issues)).not.toContain(secret);
    }
  });

  it('property: any header map written as OTEL_EXPORTER_OTLP_HEADERS reads back as written', () => {
    const key = fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/);
    const value = fc.string({ maxLength: 30 }).filter((v) => !/[\r\n\0]/.test(v));
    fc.assert(
      fc.property(fc.dictionary(key, value, { maxKeys: 6 }), (headers) => {
        const written = Object.entries(headers).map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join(',');
        const { traces, issues } = resolveTraces(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_HEADERS: written });
        expect(issues).toEqual([]);
        // Percent-encoded white space is the value's own: kept.
        expect(traces?.headers).toEqual(headers);
      }),
    );
  });
});

describe('telemetry in gateway.yaml', () => {
  async function load(gateway: string, env: NodeJS.ProcessEnv = {}) {
    const dir = await mkdtemp(join(tmpdir(), 'mag-telemetry-'));
    await writeFile(join(dir, 'gateway.yaml'), `public_url: https://mcp.example.test\n${gateway}`);
    return loadConfig(join(dir, 'gateway.yaml'), env);
  }

  it('check prints where spans go and the export header names, never their values', async () => {
    const config = await load('telemetry:\n  traces: { otlp_endpoint: "http://otel-collector:4318", sample_ratio: 0.1 }\n', {
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=collector-secret',
    });
    const printed = describeRoutes(config);
    expect(printed).toContain('traces → http://otel-collector:4318/v1/traces (http/protobuf, sample_ratio=0.1, service.name=mcp-auth-gateway, headers: x-api-key)');
    expect(printed).not.toContain('collector-secret');
    expect(describeRoutes(await load(''))).toContain('traces: off');
  });

  it("the telemetry example of docs/operations.md loads as it says", async () => {
    const page = await readFile(join(import.meta.dirname, '../../docs/operations.md'), 'utf8');
    const block = [...page.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!).find((text) => /^telemetry:/m.test(text));
    expect(block).toBeDefined();
    const config = await load(block!);
    expect(config.traces).toMatchObject({ url: 'http://otel-collector:4318/v1/traces', sampleRatio: 0.25, protocol: 'http/protobuf' });
  });

  it('a bad sample_ratio or endpoint is refused at load, with its line', async () => {
    await expect(load('telemetry:\n  traces: { otlp_endpoint: "http://c:4318", sample_ratio: 2 }\n')).rejects.toThrow(ConfigError);
    await expect(load('telemetry:\n  traces: { otlp_endpoint: "grpc://c:4317" }\n')).rejects.toThrow(/gateway\.yaml:3:\d+: .*http\(s\) URL/);
    await expect(load('telemetry:\n  traces: { endpoint: "http://c:4318" }\n')).rejects.toThrow(ConfigError);
  });
});
