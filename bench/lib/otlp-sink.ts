// A stand-in OpenTelemetry collector for the tracing-on variant of
// `npm run bench:compare`: accepts OTLP/HTTP exports (POST /v1/traces) and
// answers 200 with an empty response, counting spans' bytes only. It runs in
// the harness process, so its CPU is not the gateway's.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface OtlpSink {
  /** Base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
  url: string;
  exports: number;
  bytes: number;
  close(): Promise<void>;
}

export async function startOtlpSink(): Promise<OtlpSink> {
  const sink = { exports: 0, bytes: 0 };
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (sink.bytes += chunk.length));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') sink.exports++;
      res.writeHead(req.method === 'POST' ? 200 : 404, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(sink, {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}
