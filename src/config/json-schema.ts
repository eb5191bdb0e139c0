// One JSON Schema for editors, valid for both kinds of file: gateway.yaml and
// a route file. Generated from the zod schemas so the two cannot drift (a unit
// test compares it with the committed schema/gateway.schema.json).
import { z } from 'zod';
import { GatewayDocumentSchema, RouteSchema } from './schema.js';

const SCHEMA_ID = 'urn:mcp-auth-gateway:schema:gateway';

export function gatewayJsonSchema(): object {
  // `input`: defaults are optional in files. Refinements (URL shape, etc.) have
  // no JSON Schema form and are checked by the loader only.
  const { $schema, ...schema } = z.toJSONSchema(z.union([GatewayDocumentSchema, RouteSchema]), { io: 'input', target: 'draft-2020-12' });
  return {
    $schema,
    $id: SCHEMA_ID,
    title: 'mcp-auth-gateway configuration',
    description: 'gateway.yaml (global settings, optional inline routes) or one route file of the config directory',
    ...schema,
  };
}
