/**
 * The one gateway.yaml builder, for the in-process gateway (gateway.ts) and the child process
 * (gateway-process.ts) alike: loopback, an ephemeral port, no audit sink, whatever `extra` says.
 */

/** The public URL the suites configure unless a gateway serves its own origin: distinct from the address tests connect to. */
export const PUBLIC_URL = 'https://mcp.example.test';

/** A gateway whose public_url is where it listens: its port and `http://127.0.0.1:<port>`. */
export interface Origin {
  port: number;
  url: string;
}

/** gateway.yaml (as an object): `extra` overrides the defaults, key by key. */
export function gatewayYaml(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { listen: { host: '127.0.0.1', port: 0 }, public_url: PUBLIC_URL, audit: { sink: 'none' }, log_level: 'debug', ...extra };
}

/** gateway.yaml for a gateway on its own `origin` (public_url = where it listens). */
export function originYaml(origin: Origin, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return gatewayYaml({ listen: { host: '127.0.0.1', port: origin.port }, public_url: origin.url, ...extra });
}

/** The built-in authorization server with the dev login, `extra` merged in. */
export function devAuthorizationServer(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { enabled: true, login: { kind: 'dev' }, ...extra };
}
