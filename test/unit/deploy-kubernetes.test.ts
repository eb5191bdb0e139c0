/**
 * deploy/kubernetes: every manifest parses; both overlays render with the
 * real kustomize (`kubectl kustomize`, v5; required); every object validates against the
 * Kubernetes schemas (kubernetes-models, plus its TypeScript types for
 * unknown fields, which the schemas let through); and the manifests agree
 * with the gateway: port, probes, config mount, command line, drain timing,
 * and a ConfigMap that loads with the environment the Deployment provides;
 * the table of docs/deployment.md names every variable each overlay needs.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { GatewaySchema } from '../../src/config/schema.js';
import type { GatewayConfig } from '../../src/config/types.js';
import { instructions, parseDockerfile } from '../helpers/dockerfile.js';
import { TEST_SECRETS, containerEnv, kustomizeVersion, readYamlDocuments, renderWithKubectl, type EnvVar, type K8sObject } from '../helpers/kustomize.js';

const REPO = resolve(import.meta.dirname, '../..');
const KUBERNETES = join(REPO, 'deploy/kubernetes');
const OVERLAYS = ['sidecar', 'standalone'] as const;
const DEFAULTS = GatewaySchema.parse({ public_url: 'https://x.example' });

interface Probe {
  httpGet?: { path: string; port: number | string };
  tcpSocket?: { port: number | string };
  periodSeconds?: number;
  timeoutSeconds?: number;
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  workingDir?: string;
  restartPolicy?: string;
  ports?: Array<{ name?: string; containerPort: number }>;
  env?: EnvVar[];
  startupProbe?: Probe;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: { readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean; capabilities?: { drop?: string[] } };
  volumeMounts?: Array<{ name: string; mountPath: string; subPath?: string; readOnly?: boolean }>;
}
interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  volumes?: Array<{ name: string; configMap?: { name: string }; emptyDir?: unknown }>;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  terminationGracePeriodSeconds?: number;
  automountServiceAccountToken?: boolean;
}
type Workload = K8sObject & { spec: { selector: { matchLabels: Record<string, string> }; template: { metadata: { labels: Record<string, string> }; spec: PodSpec } } };

// Rendered by the real kustomize, as `kubectl apply -k` renders them.
const rendered = Object.fromEntries(OVERLAYS.map((o) => [o, renderWithKubectl(join(KUBERNETES, 'overlays', o))])) as Record<(typeof OVERLAYS)[number], K8sObject[]>;
const find = <T = K8sObject>(overlay: (typeof OVERLAYS)[number], kind: string, name: string) => {
  const object = rendered[overlay].find((o) => o.kind === kind && o.metadata.name === name);
  if (!object) throw new Error(`${overlay}: no ${kind}/${name}`);
  return object as T;
};
const gatewayDeployment = (overlay: (typeof OVERLAYS)[number]) => find<Workload>(overlay, 'Deployment', 'mcp-auth-gateway');
const gatewayContainer = (overlay: (typeof OVERLAYS)[number]) => gatewayDeployment(overlay).spec.template.spec.containers.find((c) => c.name === 'gateway')!;
const portNumber = (container: Container, port: number | string) =>
  typeof port === 'number' ? port : container.ports?.find((p) => p.name === port)?.containerPort;

function yamlFilesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.yaml')).map((f) => join(dir, f));
}

describe('the manifests', () => {
  it('every YAML file under deploy/kubernetes parses', () => {
    const files = yamlFilesUnder(KUBERNETES);
    expect(files.length).toBeGreaterThan(10);
    for (const file of files) expect(readYamlDocuments(file).length, relative(REPO, file)).toBeGreaterThan(0);
  });

  it.each(OVERLAYS)('%s: kustomize v5 renders it (kubectl kustomize), the generated ConfigMap under its stable name', (overlay) => {
    expect(kustomizeVersion()).toMatch(/^v5\./);
    expect(rendered[overlay].map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(expect.arrayContaining(['Deployment/mcp-auth-gateway', 'Service/mcp-auth-gateway', 'ConfigMap/mcp-auth-gateway-config']));
  });

  it.each(OVERLAYS)('%s: every object validates against the Kubernetes schemas', async (overlay) => {
    for (const object of rendered[overlay]) {
      const Model = await modelClass(object);
      expect(() => new Model(object).validate(), `${object.kind}/${object.metadata.name}`).not.toThrow();
    }
  });

  it('no object has a field the Kubernetes API does not know (type-checked against the API types)', () => {
    const problems = unknownFieldProblems([...rendered.sidecar, ...rendered.standalone]);
    expect(problems).toEqual([]);
  });

  it('the type check would catch a misspelt field', () => {
    const deployment = structuredClone(gatewayDeployment('sidecar'));
    (deployment.spec.template.spec.containers[0] as unknown as Record<string, unknown>).readinesProbe = {};
    expect(unknownFieldProblems([deployment]).join()).toMatch(/readinesProbe/);
  });
});

describe('the manifests agree with the gateway', () => {
  const dockerfile = parseDockerfile(join(REPO, 'deploy/Dockerfile'));
  const runtime = dockerfile.stages.at(-1)!;

  it.each(OVERLAYS)('%s: the container runs the image entrypoint, in its working directory, on the default port', (overlay) => {
    const gateway = gatewayContainer(overlay);
    expect(gateway.command).toEqual(instructions(runtime, 'ENTRYPOINT')[0]!.exec);
    expect(gateway.workingDir).toBe(instructions(runtime, 'WORKDIR').at(-1)!.args);
    expect(gateway.args).toBeUndefined();
    expect(gateway.ports).toEqual([{ name: 'http', containerPort: DEFAULTS.listen.port, protocol: 'TCP' }]);
    expect(instructions(runtime, 'EXPOSE')[0]!.args).toBe(String(DEFAULTS.listen.port));
    // The pod runs as the image's user.
    expect(`${gatewayDeployment(overlay).spec.template.spec.securityContext?.runAsUser}`).toBe(instructions(runtime, 'USER').at(-1)!.args.split(':')[0]);
  });

  it.each(OVERLAYS)('%s: probes hit /healthz and /readyz on the gateway port; readiness outlasts the store timeout', async (overlay) => {
    const gateway = gatewayContainer(overlay);
    const config = await loadOverlayConfig(overlay);
    for (const [probe, path] of [
      [gateway.startupProbe, '/healthz'],
      [gateway.livenessProbe, '/healthz'],
      [gateway.readinessProbe, '/readyz'],
    ] as const) {
      expect(probe?.httpGet?.path).toBe(path);
      expect(portNumber(gateway, probe!.httpGet!.port)).toBe(config.port);
    }
    // /readyz waits up to store_timeout for the store's ping before it answers.
    expect(gateway.readinessProbe!.timeoutSeconds! * 1000).toBeGreaterThan(config.storeTimeoutMs);
  });

  it.each(OVERLAYS)('%s: the config directory is the mounted ConfigMap, as a whole directory', (overlay) => {
    const gateway = gatewayContainer(overlay);
    const configPath = gateway.command![gateway.command!.indexOf('--config') + 1];
    const mount = gateway.volumeMounts!.find((m) => m.mountPath === configPath)!;
    expect(mount).toBeDefined();
    expect(mount.subPath).toBeUndefined(); // subPath mounts never see ConfigMap updates
    expect(mount.readOnly).toBe(true);
    const volume = gatewayDeployment(overlay).spec.template.spec.volumes!.find((v) => v.name === mount.name)!;
    const configMap = find<K8sObject & { data: Record<string, string> }>(overlay, 'ConfigMap', volume.configMap!.name);
    expect(Object.keys(configMap.data)).toContain('gateway.yaml');
  });

  it.each(OVERLAYS)('%s: the Service exposes only the gateway port and selects the gateway pods', (overlay) => {
    const service = find<K8sObject & { spec: { selector: Record<string, string>; ports: Array<{ targetPort: string | number }> } }>(overlay, 'Service', 'mcp-auth-gateway');
    const pod = gatewayDeployment(overlay).spec.template;
    expect(service.spec.ports).toHaveLength(1);
    expect(portNumber(gatewayContainer(overlay), service.spec.ports[0]!.targetPort)).toBe(DEFAULTS.listen.port);
    expect(pod.metadata.labels).toMatchObject(service.spec.selector);
    expect(pod.metadata.labels).toMatchObject(gatewayDeployment(overlay).spec.selector.matchLabels);
  });

  it.each(OVERLAYS)('%s: SIGKILL comes only after drain_delay + shutdown_grace + slack', async (overlay) => {
    const config = await loadOverlayConfig(overlay);
    const grace = gatewayDeployment(overlay).spec.template.spec.terminationGracePeriodSeconds!;
    expect(grace * 1000).toBeGreaterThanOrEqual(config.drainDelayMs + config.shutdownGraceMs + 5_000);
  });

  it.each(OVERLAYS)('%s: every container is locked down and sized', (overlay) => {
    const workloads = rendered[overlay].filter((o): o is Workload => o.kind === 'Deployment' || o.kind === 'StatefulSet');
    for (const workload of workloads) {
      const pod = workload.spec.template.spec;
      expect(pod.securityContext?.runAsNonRoot, workload.metadata.name).toBe(true);
      expect(pod.automountServiceAccountToken).toBe(false);
      for (const container of [...pod.containers, ...(pod.initContainers ?? [])]) {
        const where = `${workload.metadata.name}/${container.name}`;
        expect(container.securityContext, where).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
        expect(container.resources?.requests?.cpu, where).toBeDefined();
        expect(container.resources?.requests?.memory, where).toBeDefined();
        expect(container.resources?.limits?.memory, where).toBeDefined();
        // A read-only root: whatever writes needs a volume of its own.
        expect(container.volumeMounts?.length ?? 0, where).toBeGreaterThan(0);
      }
    }
  });

  it('sidecar: the unmodified MCP server shares the pod, on the loopback port the route names, outlives the gateway, and is not exposed', async () => {
    const pod = gatewayDeployment('sidecar').spec.template.spec;
    const config = await loadOverlayConfig('sidecar');
    expect(config.store.kind).toBe('memory');
    expect(config.routes).toHaveLength(1);
    const upstream = new URL(config.routes[0]!.upstream);
    expect(upstream.hostname).toBe('127.0.0.1');
    const server = pod.initContainers!.find((c) => c.name === 'mcp-server')!;
    // A native sidecar: started before, stopped after the gateway (which drains meanwhile).
    expect(server.restartPolicy).toBe('Always');
    expect(server.startupProbe?.tcpSocket?.port).toBe(Number(upstream.port));
    expect(containerEnv(server.env, {}).PORT).toBe(upstream.port);
    expect(server.ports).toBeUndefined();
    const policy = find<K8sObject & { spec: { ingress: Array<{ ports: Array<{ port: string | number }> }> } }>('sidecar', 'NetworkPolicy', 'mcp-auth-gateway');
    expect(policy.spec.ingress.flatMap((rule) => rule.ports.map((p) => portNumber(gatewayContainer('sidecar'), p.port)))).toEqual([DEFAULTS.listen.port]);
  });

  it('standalone: Redis as the gateway needs it, reachable where REDIS_URL points, and scaling that keeps one replica up', async () => {
    const config = await loadOverlayConfig('standalone');
    expect(config.store).toMatchObject({ kind: 'redis', keyPrefix: 'mag:' });
    const redisUrl = new URL((config.store as { url: string }).url);
    expect(decodeURIComponent(redisUrl.password)).toBe(TEST_SECRETS['mcp-auth-gateway-redis/password']);

    const redis = find<Workload & { spec: { volumeClaimTemplates: Array<{ metadata: { name: string } }> } }>('standalone', 'StatefulSet', 'mcp-auth-gateway-redis');
    const server = redis.spec.template.spec.containers[0]!;
    const args = server.args!.join(' ');
    expect(args).toContain('--appendonly yes');
    expect(args).toContain('--maxmemory-policy noeviction');
    expect(args).toContain('--requirepass $(REDIS_PASSWORD)');
    const dataDir = server.args![server.args!.indexOf('--dir') + 1];
    const dataMount = server.volumeMounts!.find((m) => m.mountPath === dataDir)!;
    expect(redis.spec.volumeClaimTemplates.map((t) => t.metadata.name)).toContain(dataMount.name);

    const service = find<K8sObject & { spec: { selector: Record<string, string>; ports: Array<{ port: number; targetPort: string }> } }>('standalone', 'Service', redisUrl.hostname);
    expect(service.spec.ports.map((p) => p.port)).toContain(Number(redisUrl.port));
    expect(redis.spec.template.metadata.labels).toMatchObject(service.spec.selector);

    const hpa = find<K8sObject & { spec: { scaleTargetRef: { kind: string; name: string }; minReplicas: number; maxReplicas: number } }>('standalone', 'HorizontalPodAutoscaler', 'mcp-auth-gateway');
    expect(hpa.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: 'mcp-auth-gateway' });
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    expect(gatewayDeployment('standalone').spec).not.toHaveProperty('replicas'); // the HPA owns it
    const pdb = find<K8sObject & { spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } } }>('standalone', 'PodDisruptionBudget', 'mcp-auth-gateway');
    expect(pdb.spec.minAvailable).toBeLessThan(hpa.spec.minReplicas);
    expect(gatewayDeployment('standalone').spec.template.metadata.labels).toMatchObject(pdb.spec.selector.matchLabels);

    // Only gateway pods may reach Redis.
    const redisPolicy = find<K8sObject & { spec: { podSelector: { matchLabels: Record<string, string> }; ingress: Array<{ from: Array<{ podSelector: { matchLabels: Record<string, string> } }> }> } }>('standalone', 'NetworkPolicy', 'mcp-auth-gateway-redis');
    expect(redis.spec.template.metadata.labels).toMatchObject(redisPolicy.spec.podSelector.matchLabels);
    expect(redisPolicy.spec.ingress.flatMap((r) => r.from.map((f) => f.podSelector.matchLabels))).toEqual([gatewayDeployment('standalone').spec.selector.matchLabels]);
  });

  it('every Secret the manifests refer to is one docs/deployment.md tells how to create', () => {
    const docs = readFileSync(join(REPO, 'docs/deployment.md'), 'utf8');
    // Every secretKeyRef, whatever the order of its fields in kustomize's output.
    const refs = new Set<string>();
    JSON.stringify(rendered, (field, value: unknown) => {
      if (field === 'secretKeyRef') refs.add(JSON.stringify([(value as { name: string }).name, (value as { key: string }).key]));
      return value;
    });
    expect(refs.size).toBeGreaterThan(0);
    for (const ref of refs) {
      const [name, key] = JSON.parse(ref) as [string, string];
      expect(docs).toMatch(new RegExp(`kubectl create secret generic ${name}\\b[^\\n]*--from-literal=${key}=`));
      expect(TEST_SECRETS[`${name}/${key}`]).toBeDefined();
    }
  });
});

describe("docs/deployment.md names every variable each overlay needs", () => {
  const page = readFileSync(join(REPO, 'docs/deployment.md'), 'utf8');
  /** The table's rows as `overlay variable`. */
  const rows = new Set([...page.matchAll(/^\| (sidecar|standalone) \| `([A-Z_]+)` \|/gm)].map((m) => `${m[1]} ${m[2]}`));

  it.each(OVERLAYS)('%s: PUBLIC_URL, each Secret-fed variable and each { env: NAME } of its config', (overlay) => {
    const env = gatewayContainer(overlay).env ?? [];
    const data = find<K8sObject & { data: Record<string, string> }>(overlay, 'ConfigMap', 'mcp-auth-gateway-config').data;
    const needed = new Set([
      'PUBLIC_URL',
      ...env.filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.name),
      ...[...Object.values(data).join('\n').matchAll(/\{ *env: *([A-Z_][A-Z0-9_]*) *\}/g)].map((m) => m[1]!),
    ]);
    for (const name of needed) expect(rows, `${overlay} ${name}`).toContain(`${overlay} ${name}`);
    // Named there and set by the overlay's own Deployment, not fixed by the base.
    for (const name of needed) expect(env.map((e) => e.name), name).toContain(name);
  });

  it('the base fixes no PUBLIC_URL: each overlay sets its own', () => {
    const base = readFileSync(join(KUBERNETES, 'base/deployment.yaml'), 'utf8');
    expect(base).not.toMatch(/name: PUBLIC_URL/);
    for (const overlay of OVERLAYS) expect(readFileSync(join(KUBERNETES, 'overlays', overlay, 'deployment-patch.yaml'), 'utf8')).toMatch(/name: PUBLIC_URL/);
  });
});

describe('the ConfigMap loads with the environment the Deployment gives it', () => {
  it.each(OVERLAYS)('%s', async (overlay) => {
    const config = await loadOverlayConfig(overlay);
    const env = containerEnv(gatewayContainer(overlay).env, TEST_SECRETS);
    expect(config.publicUrl).toBe(env.PUBLIC_URL);
    expect(config.port).toBe(DEFAULTS.listen.port);
    expect(config.host).toBe('0.0.0.0'); // reachable from the kubelet and the Service
    expect(config.routes.map((r) => r.resource)).toEqual([`${env.PUBLIC_URL}/mcp`]);
    // Secrets arrive through { env: NAME } only: the ConfigMap holds none.
    const data = find<K8sObject & { data: Record<string, string> }>(overlay, 'ConfigMap', 'mcp-auth-gateway-config').data;
    for (const secret of Object.values(TEST_SECRETS)) expect(JSON.stringify(data)).not.toContain(secret);
  });

  it.each(OVERLAYS)('%s, checked without that environment, names PUBLIC_URL as the way to give public_url', async (overlay) => {
    await expect(loadOverlayConfig(overlay, {})).rejects.toThrow(/gateway\.yaml:\d+:\d+: public_url: required, but missing: write it here, or set the PUBLIC_URL environment variable/);
  });
});

const tempDirs: string[] = [];
afterAll(async () => {
  await Promise.all(tempDirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** The overlay's ConfigMap written out as a config directory, loaded with the gateway container's environment. */
async function loadOverlayConfig(overlay: (typeof OVERLAYS)[number], env = containerEnv(gatewayContainer(overlay).env, TEST_SECRETS)): Promise<GatewayConfig> {
  const dir = await mkdtemp(join(tmpdir(), `mag-deploy-${overlay}-`));
  tempDirs.push(dir);
  const data = find<K8sObject & { data: Record<string, string> }>(overlay, 'ConfigMap', 'mcp-auth-gateway-config').data;
  for (const [name, text] of Object.entries(data)) await writeFile(join(dir, name), text);
  return loadConfig(dir, env);
}

/** The kubernetes-models class for an object's apiVersion and kind. */
async function modelClass(object: K8sObject): Promise<new (data: unknown) => { validate(): void }> {
  const module = (await import(/* @vite-ignore */ `kubernetes-models/${object.apiVersion}/${object.kind}`)) as Record<string, new (data: unknown) => { validate(): void }>;
  const Model = module[object.kind];
  if (!Model) throw new Error(`kubernetes-models has no ${object.apiVersion} ${object.kind}`);
  return Model;
}

/**
 * The schemas in kubernetes-models accept unknown fields (the API server
 * rejects them, or silently drops them); the package's TypeScript interfaces
 * do not, so each object is type-checked as an object literal of its type.
 */
function unknownFieldProblems(objects: readonly K8sObject[]): string[] {
  const fileName = join(REPO, 'test/unit/__deploy-manifests__.ts');
  const source = objects
    .map((o, i) => `// ${o.kind}/${o.metadata.name}\nimport type { I${o.kind} as T${i} } from 'kubernetes-models/${o.apiVersion}/${o.kind}';\nexport const m${i}: T${i} = ${JSON.stringify(o, null, 1)};`)
    .join('\n');
  const options: ts.CompilerOptions = { strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, skipLibCheck: true, types: [] };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (name, language, ...rest) => (name === fileName ? ts.createSourceFile(name, source, language) : getSourceFile.call(host, name, language, ...rest));
  host.fileExists = (name) => name === fileName || fileExists.call(host, name);
  host.readFile = (name) => (name === fileName ? source : readFile.call(host, name));
  const program = ts.createProgram([fileName], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const line = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line : 0;
    const owner = source.split('\n').slice(0, line + 1).reverse().find((l) => l.startsWith('// '));
    return `${owner?.slice(3) ?? '?'}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}
