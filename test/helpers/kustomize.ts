/**
 * Renders a kustomize directory into its Kubernetes objects with the real
 * kustomize, `kubectl kustomize` (kustomize v5), as `kubectl apply -k` would,
 * for tests that check the deploy/ manifests. kubectl is required: the
 * machines that run the tests have it (google-cloud-cli's), and a renderer
 * of our own could only agree with itself.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; [key: string]: unknown }; [key: string]: unknown };

/** Every document of a YAML file; throws on a syntax error. */
export function readYamlDocuments(file: string): unknown[] {
  return parseAllDocuments(readFileSync(file, 'utf8')).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
    return doc.toJS() as unknown;
  }).filter((d) => d !== null);
}

/** `kubectl kustomize <dir>`; throws, saying what to install, when kubectl is missing. */
export function renderWithKubectl(dir: string): K8sObject[] {
  let out: string;
  try {
    out = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new Error('kubectl is required to render deploy/kubernetes (kubectl kustomize, kustomize v5)');
    throw err;
  }
  return parseAllDocuments(out).map((d) => d.toJS() as K8sObject);
}

/** kustomize's version as kubectl reports it (`v5.5.0`). */
export function kustomizeVersion(): string {
  const out = execFileSync('kubectl', ['version', '--client'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
  return /Kustomize Version:\s*(v\S+)/.exec(out)?.[1] ?? 'unknown';
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
