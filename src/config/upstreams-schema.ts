// The file format of an aggregated route (DESIGN §8.2): `upstreams:` instead of
// `upstream:`, each entry a server of its own, and `names:`, how the client is
// shown their tools and prompts. The entry's pieces are the route's own
// schemas, handed in so that this module does not import schema.ts back.
import { z } from 'zod';

export const DEFAULT_NAMES_PATTERN = '{upstream}__{name}';

interface RouteSchemas<U extends z.ZodType, A extends z.ZodType> {
  upstream: U;
  upstreamAuth: A;
  duration: z.ZodType<string>;
}

export function aggregateRouteFields<U extends z.ZodType, A extends z.ZodType>({ upstream, upstreamAuth, duration }: RouteSchemas<U, A>) {
  const entry = z
    .strictObject({
      upstream: upstream.describe('a Streamable HTTP URL, { sse: URL } or { stdio: { command, ... } }'),
      upstream_auth: upstreamAuth.optional().describe('what this upstream receives instead of the client token (default: none)'),
      limits: z.strictObject({ upstream_timeout: duration.optional().describe("default: the route's limits.upstream_timeout") }).optional(),
      rename: z
        .record(z.string().min(1), z.string().min(1))
        .default({})
        .describe("tool and prompt names shown otherwise than the pattern says: the upstream's own name → the shown name (for names two upstreams share, or a clearer one)"),
    })
    .meta({ id: 'AggregatedUpstream', description: 'One server behind an aggregated route' });
  return {
    upstreams: z
      .record(z.string(), entry)
      .optional()
      .describe('instead of upstream: several MCP servers behind this one route, by name (the name goes into shown tool and prompt names)'),
    names: z
      .string()
      .optional()
      .describe(`with upstreams: how tool and prompt names are shown, {upstream} and {name} each once (default ${DEFAULT_NAMES_PATTERN})`),
  };
}
