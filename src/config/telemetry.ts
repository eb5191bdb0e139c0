// `telemetry.traces` and the standard OTEL_* variables → the runtime
// TracesConfig, or undefined (tracing off). The variables win over the file,
// as PORT and PUBLIC_URL do (config/env.ts): one image, many deployments.
// Read once at load; the exporter is given every value explicitly.
import type { ConfigIssue } from './config-error.js';
import type { GatewayFile } from './schema.js';
import type { TracesConfig } from './types.js';

type TracesFile = NonNullable<GatewayFile['telemetry']>['traces'];

const DEFAULT_SERVICE_NAME = 'mcp-auth-gateway';
/** OTEL_EXPORTER_OTLP_TIMEOUT's default (OpenTelemetry specification). */
const DEFAULT_EXPORT_TIMEOUT_MS = 10_000;
const PROTOCOLS = ['http/protobuf', 'http/json'] as const;

/** OTEL_TRACES_SAMPLER values: whether the parent's flag is followed, and the fixed ratio (undefined: the _ARG, default 1). */
const SAMPLERS: Readonly<Record<string, { parentBased: boolean; ratio?: number }>> = {
  always_on: { parentBased: false, ratio: 1 },
  always_off: { parentBased: false, ratio: 0 },
  traceidratio: { parentBased: false },
  parentbased_always_on: { parentBased: true, ratio: 1 },
  parentbased_always_off: { parentBased: true, ratio: 0 },
  parentbased_traceidratio: { parentBased: true },
};

export function resolveTraces(file: TracesFile, env: NodeJS.ProcessEnv): { traces?: TracesConfig; issues: ConfigIssue[] } {
  const issues: ConfigIssue[] = [];
  const problem = (name: string, message: string) => issues.push({ file: `env:${name}`, line: 0, column: 0, message });
  // Empty counts as unset, as for the gateway's own variables.
  const read = (name: string) => env[name] || undefined;

  if (read('OTEL_SDK_DISABLED')?.trim().toLowerCase() === 'true') return { issues };
  const exporter = read('OTEL_TRACES_EXPORTER')?.trim().toLowerCase();
  if (exporter === 'none') return { issues };
  if (exporter !== undefined && exporter !== 'otlp') problem('OTEL_TRACES_EXPORTER', 'only otlp (OTLP over HTTP) or none is supported');

  const url = endpoint(file, read, problem);
  const protocolName = read('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = (read(protocolName)?.trim() ?? 'http/protobuf') as TracesConfig['protocol'];
  if (!PROTOCOLS.includes(protocol)) problem(protocolName, `expected http/protobuf or http/json (grpc is not supported)`);
  const headers = { ...exportHeaders('OTEL_EXPORTER_OTLP_HEADERS', read, problem), ...exportHeaders('OTEL_EXPORTER_OTLP_TRACES_HEADERS', read, problem) };
  const timeoutName = read('OTEL_EXPORTER_OTLP_TRACES_TIMEOUT') ? 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TIMEOUT';
  const timeout = read(timeoutName)?.trim();
  if (timeout !== undefined && !/^[1-9][0-9]{0,6}$/.test(timeout)) problem(timeoutName, 'expected a positive number of milliseconds');
  const { sampleRatio, parentBased } = sampler(file, read, problem);
  if (url === undefined || issues.length > 0) return { issues };
  return {
    traces: {
      url,
      protocol,
      headers,
      sampleRatio,
      parentBased,
      serviceName: read('OTEL_SERVICE_NAME')?.trim() || DEFAULT_SERVICE_NAME,
      exportTimeoutMs: timeout !== undefined && /^[0-9]+$/.test(timeout) ? Number(timeout) : DEFAULT_EXPORT_TIMEOUT_MS,
    },
    issues,
  };
}

type Read = (name: string) => string | undefined;
type Problem = (name: string, message: string) => void;

/** The traces URL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else a base URL (the variable's, then the file's) + v1/traces. */
function endpoint(file: TracesFile, read: Read, problem: Problem): string | undefined {
  const whole = read('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (whole !== undefined) return httpUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', whole.trim(), problem);
  const baseName = read('OTEL_EXPORTER_OTLP_ENDPOINT') ? 'OTEL_EXPORTER_OTLP_ENDPOINT' : undefined;
  const base = baseName ? httpUrl(baseName, read(baseName)!.trim(), problem) : file?.otlp_endpoint;
  if (base === undefined) return undefined;
  return base.endsWith('/') ? `${base}v1/traces` : `${base}/v1/traces`;
}

/** The message never repeats the value: a URL may carry credentials. */
function httpUrl(name: string, value: string, problem: Problem): string | undefined {
  if (URL.canParse(value) && /^https?:$/.test(new URL(value).protocol) && !value.includes('#')) return value;
  problem(name, 'expected an http(s) URL without a fragment');
  return undefined;
}

/** `key=value,key2=value2`, values percent-encoded (OpenTelemetry specification); messages never repeat a value. */
function exportHeaders(name: string, read: Read, problem: Problem): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of (read(name) ?? '').split(',')) {
    if (entry.trim() === '') continue;
    const at = entry.indexOf('=');
    const key = entry.slice(0, Math.max(at, 0)).trim().toLowerCase();
    let value: string | undefined;
    try {
      value = at > 0 ? decodeURIComponent(entry.slice(at + 1).trim()) : undefined;
    } catch {
      value = undefined;
    }
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(key) || value === undefined || /[\r\n\0]/.test(value)) {
      problem(name, 'expected key=value pairs separated by commas, values percent-encoded');
      continue;
    }
    out[key] = value;
  }
  return out;
}

function sampler(file: TracesFile, read: Read, problem: Problem): { sampleRatio: number; parentBased: boolean } {
  const fromFile = { sampleRatio: file?.sample_ratio ?? 1, parentBased: false };
  const name = read('OTEL_TRACES_SAMPLER')?.trim().toLowerCase();
  if (name === undefined) return fromFile;
  const known = Object.hasOwn(SAMPLERS, name) ? SAMPLERS[name] : undefined;
  if (!known) {
    problem('OTEL_TRACES_SAMPLER', `expected one of ${Object.keys(SAMPLERS).join(', ')}`);
    return fromFile;
  }
  if (known.ratio !== undefined) return { sampleRatio: known.ratio, parentBased: known.parentBased };
  const arg = read('OTEL_TRACES_SAMPLER_ARG')?.trim();
  const ratio = arg === undefined ? 1 : Number(arg);
  if (arg !== undefined && (!/^[0-9.eE+-]+$/.test(arg) || !(ratio >= 0 && ratio <= 1))) {
    problem('OTEL_TRACES_SAMPLER_ARG', 'expected a number from 0 to 1');
    return fromFile;
  }
  return { sampleRatio: ratio, parentBased: known.parentBased };
}
