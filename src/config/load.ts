// Loads the configuration: `source` is a directory (gateway.yaml plus one route
// per other *.yaml / *.yml file, recursively, in sorted order) or a single
// gateway.yaml, which may then list its routes under `routes:`. Every problem in
// every file is collected before one ConfigError is thrown, so a user fixes
// them all in one pass.
import { readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ConfigError, type ConfigIssue } from './config-error.js';
import { ConfigDigest, GATEWAY_FILES, yamlFilesUnder } from './config-files.js';
import { applyEnvOverrides, howToGiveByEnv, readEnvOverrides } from './env.js';
import { resolveConfig, type Located } from './resolve.js';
import { GatewayDocumentSchema, RouteSchema, type RouteFile } from './schema.js';
import type { GatewayConfig } from './types.js';
import { validate } from './validate.js';
import { parseYamlFile, type YamlFile } from './yaml-file.js';

export async function loadConfig(source: string, env: NodeJS.ProcessEnv = process.env): Promise<GatewayConfig> {
  const { gatewayFile, routeFiles, configDir } = await findFiles(source);
  const { overrides, issues } = readEnvOverrides(env);

  const digest = new ConfigDigest();
  const gw = await readYaml(gatewayFile, digest);
  issues.push(...gw.issues);
  const gateway = gw.data === undefined ? undefined : validate(GatewayDocumentSchema, applyEnvOverrides(gw.data, overrides), gw.at, howToGiveByEnv);
  issues.push(...(gateway?.issues ?? []));

  const routes: Located<RouteFile>[] = (gateway?.value?.routes ?? []).map((value, i) => ({
    file: gatewayFile,
    value,
    at: (path, message, key) => gw.at(['routes', i, ...path], message, key),
  }));
  for (const file of routeFiles) {
    const parsed = await readYaml(file, digest);
    const route = parsed.data === undefined ? undefined : validate(RouteSchema, parsed.data, parsed.at);
    issues.push(...parsed.issues, ...(route?.issues ?? []));
    if (route?.value) routes.push({ file, value: route.value, at: parsed.at });
  }

  // Resolution needs valid global settings; it still runs beside broken route
  // files so their siblings' problems (missing secrets…) are reported too.
  const fail = () => new ConfigError(issues.sort(byPosition([gatewayFile, ...routeFiles])));
  if (!gateway?.value) throw fail();
  const { routes: _inline, ...globals } = gateway.value;
  const resolved = await resolveConfig({ source, configDir, gateway: { file: gatewayFile, value: globals, at: gw.at }, routes, env });
  issues.push(...resolved.issues);
  if (issues.length > 0) throw fail();
  return { ...resolved.config, digest: digest.value() };
}

/** Environment first, then file by file in load order, top to bottom. */
function byPosition(files: string[]): (a: ConfigIssue, b: ConfigIssue) => number {
  return (a, b) => files.indexOf(a.file) - files.indexOf(b.file) || a.line - b.line || a.column - b.column;
}

async function findFiles(source: string): Promise<{ gatewayFile: string; routeFiles: string[]; configDir: string }> {
  const info = await stat(source).catch((err: NodeJS.ErrnoException) => {
    throw new ConfigError([{ file: source, line: 0, column: 0, message: `cannot read the configuration: ${err.code ?? err.message}` }]);
  });
  if (!info.isDirectory()) return { gatewayFile: source, routeFiles: [], configDir: dirname(source) };

  const files = (await yamlFilesUnder(source)).sort();
  const gatewayFiles = files.filter((f) => GATEWAY_FILES.includes(f));
  if (gatewayFiles.length !== 1) {
    const message = gatewayFiles.length === 0 ? 'the config directory has no gateway.yaml' : 'choose one of gateway.yaml and gateway.yml';
    throw new ConfigError([{ file: join(source, 'gateway.yaml'), line: 0, column: 0, message }]);
  }
  return {
    gatewayFile: join(source, gatewayFiles[0] as string),
    routeFiles: files.filter((f) => !GATEWAY_FILES.includes(f)).map((f) => join(source, f)),
    configDir: source,
  };
}

async function readYaml(file: string, digest: ConfigDigest): Promise<YamlFile> {
  try {
    const text = await readFile(file, 'utf8');
    digest.add(file, text);
    return parseYamlFile(file, text);
  } catch (err) {
    const issue: ConfigIssue = { file, line: 0, column: 0, message: `cannot read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
    return { data: undefined, at: () => issue, issues: [issue] };
  }
}
