/**
 * Renders a kustomize directory into its Kubernetes objects, as
 * `kubectl apply -k` would, for tests that check the deploy/ manifests.
 *
 * `renderWithKubectl` runs the real kustomize (`kubectl kustomize`) when
 * kubectl is installed. `renderBuiltin` needs nothing installed and covers
 * exactly the features deploy/kubernetes uses — resources, configMapGenerator
 * (files, stable names), strategic-merge patches, and the `images` override
 * docs/deployment.md tells users to add — and throws on any other,
 * so a manifest change it cannot follow fails loudly instead of rendering
 * wrong. Where both run, tests assert they agree.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseAllDocuments } from 'yaml';

export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; [key: string]: unknown }; [key: string]: unknown };

/** Every document of a YAML file; throws on a syntax error. */
export function readYamlDocuments(file: string): unknown[] {
  return parseAllDocuments(readFileSync(file, 'utf8')).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
    return doc.toJS() as unknown;
  }).filter((d) => d !== null);
}

/** `kubectl kustomize <dir>`, or undefined when kubectl is not installed. */
export function renderWithKubectl(dir: string): K8sObject[] | undefined {
  let out: string;
  try {
    out = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  return parseAllDocuments(out).map((d) => d.toJS() as K8sObject);
}

const KUSTOMIZATION_KEYS = new Set(['apiVersion', 'kind', 'resources', 'configMapGenerator', 'patches', 'images']);

export function renderBuiltin(dir: string): K8sObject[] {
  const kustomization = readYamlDocuments(join(dir, 'kustomization.yaml'))[0] as Record<string, unknown>;
  for (const key of Object.keys(kustomization)) {
    if (!KUSTOMIZATION_KEYS.has(key)) throw new Error(`${dir}/kustomization.yaml: "${key}" is not supported by the built-in renderer`);
  }
  const objects: K8sObject[] = [];
  for (const resource of (kustomization.resources as string[] | undefined) ?? []) {
    const path = join(dir, resource);
    if (statSync(path).isDirectory()) objects.push(...renderBuiltin(path));
    else objects.push(...(readYamlDocuments(path) as K8sObject[]));
  }
  for (const generator of (kustomization.configMapGenerator as Array<Record<string, unknown>> | undefined) ?? []) {
    const { name, files, options, ...rest } = generator as { name: string; files: string[]; options?: Record<string, unknown> };
    if (Object.keys(rest).length > 0 || options?.disableNameSuffixHash !== true || Object.keys(options).length !== 1) {
      throw new Error(`${dir}: configMapGenerator ${name}: only files with disableNameSuffixHash: true are supported`);
    }
    const data: Record<string, string> = {};
    for (const entry of files) {
      const [key, path] = entry.includes('=') ? (entry.split('=', 2) as [string, string]) : [basename(entry), entry];
      data[key] = readFileSync(join(dir, path), 'utf8');
    }
    objects.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data });
  }
  for (const patch of (kustomization.patches as Array<Record<string, unknown>> | undefined) ?? []) {
    if (Object.keys(patch).join() !== 'path') throw new Error(`${dir}: only patches with just a path are supported`);
    for (const doc of readYamlDocuments(join(dir, patch.path as string)) as K8sObject[]) {
      const i = objects.findIndex((o) => o.kind === doc.kind && o.metadata.name === doc.metadata.name);
      if (i < 0) throw new Error(`${dir}: patch ${patch.path as string} targets ${doc.kind}/${doc.metadata.name}, which is not there`);
      objects[i] = strategicMerge(objects[i]!, doc) as K8sObject;
    }
  }
  for (const image of (kustomization.images as Array<{ name: string; newName?: string; newTag?: string }> | undefined) ?? []) {
    for (const container of objects.flatMap(podContainers)) {
      const [name, tag] = splitImage(container.image);
      if (name === image.name) container.image = `${image.newName ?? name}${image.newTag ?? tag ? `:${image.newTag ?? tag}` : ''}`;
    }
  }
  return objects;
}

function podContainers(object: K8sObject): Array<{ image: string }> {
  const pod = (object.spec as { template?: { spec?: { containers?: Array<{ image: string }>; initContainers?: Array<{ image: string }> } } } | undefined)?.template?.spec;
  return [...(pod?.containers ?? []), ...(pod?.initContainers ?? [])];
}

function splitImage(image: string): [string, string | undefined] {
  const colon = image.lastIndexOf(':');
  return colon > image.lastIndexOf('/') ? [image.slice(0, colon), image.slice(colon + 1)] : [image, undefined];
}

/** Lists merged by `name`, as the Kubernetes API's patch strategy for these fields says; other lists are replaced. */
const MERGED_BY_NAME = new Set(['containers', 'initContainers', 'ephemeralContainers', 'volumes', 'env', 'volumeMounts', 'imagePullSecrets']);

function strategicMerge(original: unknown, patch: unknown, field = ''): unknown {
  if (Array.isArray(patch)) {
    if (!MERGED_BY_NAME.has(field) || !Array.isArray(original)) return patch;
    const named = (items: unknown[]) => items as Array<{ name: string }>;
    // kustomize's order: the patch's items (merged into their originals) first, then the untouched originals.
    const merged = named(patch).map((item) => {
      const base = named(original).find((o) => o.name === item.name);
      return base ? strategicMerge(base, item) : item;
    });
    return [...merged, ...named(original).filter((o) => !named(patch).some((p) => p.name === o.name))];
  }
  if (isObject(patch) && isObject(original)) {
    if ('$patch' in patch) throw new Error('$patch directives are not supported by the built-in renderer');
    const out: Record<string, unknown> = { ...original };
    for (const [key, value] of Object.entries(patch)) {
      if (value === null) delete out[key];
      else out[key] = key in original ? strategicMerge(original[key], value, key) : value;
    }
    return out;
  }
  return patch;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Objects by `Kind/name`, for order-independent comparison. */
export function byKindAndName(objects: readonly K8sObject[]): Record<string, K8sObject> {
  return Object.fromEntries(objects.map((o) => [`${o.kind}/${o.metadata.name}`, o]));
}

/** What tests put in place of the cluster's Secrets (docs/deployment.md tells users how to create them). */
export const TEST_SECRETS: Readonly<Record<string, string>> = {
  'mcp-auth-gateway-redis/password': 'test-redis-password',
  'mcp-auth-gateway-upstream/token': 'test-upstream-token',
};

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string }; configMapKeyRef?: unknown; fieldRef?: unknown };
}

/**
 * A container's environment as Kubernetes builds it: `$(NAME)` expands to a
 * variable defined earlier in the list, a secretKeyRef takes its value from
 * `secrets['<secret>/<key>']` (a test stands in for the cluster's Secrets).
 */
export function containerEnv(env: readonly EnvVar[] | undefined, secrets: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const variable of env ?? []) {
    if (variable.value !== undefined) {
      out[variable.name] = variable.value.replace(/\$\((\w+)\)/g, (whole, name: string) => out[name] ?? whole);
    } else if (variable.valueFrom?.secretKeyRef) {
      const { name, key } = variable.valueFrom.secretKeyRef;
      const value = secrets[`${name}/${key}`];
      if (value === undefined) throw new Error(`no test value for Secret ${name} key ${key}`);
      out[variable.name] = value;
    } else {
      throw new Error(`env ${variable.name}: only value and secretKeyRef are supported`);
    }
  }
  return out;
}
