// Writes schema/gateway.schema.json from the zod schemas: `npm run schema`.
import { writeFile } from 'node:fs/promises';
import { gatewayJsonSchema } from '../src/config/json-schema.js';

const target = new URL('../schema/gateway.schema.json', import.meta.url);
await writeFile(target, JSON.stringify(gatewayJsonSchema(), null, 2) + '\n');
console.log(`wrote ${target.pathname}`);
