/**
 * deploy/Dockerfile, checked without a Docker engine (none runs on this
 * machine, so the image itself is not built here): the stages, the runtime
 * image's contents, user, port, health check and entrypoint, against the
 * gateway's own defaults; and the health check command run for real.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewaySchema } from '../../src/config/schema.js';
import { instructions, parseDockerfile, type Dockerfile, type Stage } from '../helpers/dockerfile.js';
import { buildGatewayCli, spawnGateway, writeConfigDir, type GatewayCli, type GatewayProcess } from '../helpers/gateway-process.js';
import { freePort } from '../helpers/net.js';

/** `import … from 'x'` / `export … from 'x'` (a list may span lines), `import 'x'`, `import('x')`: bare specifiers only. */
const IMPORT_SPECIFIERS = /^[ \t]*(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"./][^'"]*)['"]|^[ \t]*import\s*['"]([^'"./][^'"]*)['"]|\bimport\(\s*['"]([^'"./][^'"]*)['"]\s*\)/gm;

const REPO = resolve(import.meta.dirname, '../..');
const DOCKERFILE = join(REPO, 'deploy/Dockerfile');
const DEFAULT_PORT = GatewaySchema.parse({ public_url: 'https://x.example' }).listen.port;
const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; engines: { node: string } };

let dockerfile: Dockerfile;
let build: Stage;
let deps: Stage;
let runtime: Stage;

beforeAll(() => {
  dockerfile = parseDockerfile(DOCKERFILE);
  const stage = (name: string) => dockerfile.stages.find((s) => s.name === name)!;
  [build, deps, runtime] = [stage('build'), stage('deps'), stage('runtime')];
});

const runs = (stage: Stage) => instructions(stage, 'RUN').map((i) => i.args);
const copies = (stage: Stage) => instructions(stage, 'COPY');

describe('deploy/Dockerfile', () => {
  it('has build, deps and runtime stages on Node 22 LTS slim (docs/benchmark.md, "Node majors"), the runtime last', () => {
    expect(dockerfile.stages.map((s) => s.name)).toEqual(['build', 'deps', 'runtime']);
    for (const stage of dockerfile.stages) expect(stage.image).toMatch(/^node:22(\.\d+)*-[a-z]+-slim$|^node:22(\.\d+)*-slim$/);
    expect(Number(/>=(\d+)/.exec(pkg.engines.node)?.[1])).toBeLessThanOrEqual(22);
  });

  it('compiles with every dependency in the build stage, and installs production dependencies only for the runtime', () => {
    expect(runs(build)).toContainEqual(expect.stringMatching(/^npm ci\b.*--ignore-scripts/));
    expect(runs(build)).toContain('npm run build');
    expect(runs(deps)).toContainEqual(expect.stringMatching(/^npm ci --omit=dev\b.*--ignore-scripts/));
    expect(runs(runtime)).toEqual([]); // nothing installed or built in the final image
    const fromOtherStages = copies(runtime).filter((c) => c.flags.from).map((c) => `${c.flags.from} ${c.args}`);
    expect(fromOtherStages).toEqual(['deps /app/node_modules ./node_modules', 'build /app/dist ./dist']);
    // No sources, no compiler configuration, no tests in the runtime image.
    expect(copies(runtime).map((c) => c.args.split(' ')[0])).not.toContainEqual(expect.stringMatching(/^(src|test|tsconfig)/));
  });

  it('may skip install scripts: no production dependency has one', () => {
    const lock = JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean; hasInstallScript?: boolean }> };
    const production = Object.entries(lock.packages).filter(([path, p]) => path !== '' && !p.dev);
    expect(production.length).toBeGreaterThan(5);
    expect(production.filter(([, p]) => p.hasInstallScript).map(([path]) => path)).toEqual([]);
  });

  it('copies only paths that exist and that Dockerfile.dockerignore lets into the context', () => {
    const ignore = readFileSync(`${DOCKERFILE}.dockerignore`, 'utf8').split('\n').filter((l) => l && !l.startsWith('#'));
    expect(ignore[0]).toBe('**'); // everything out, then what is needed back in
    const allowed = ignore.slice(1).map((l) => l.replace(/^!/, ''));
    for (const stage of dockerfile.stages) {
      for (const copy of copies(stage).filter((c) => !c.flags.from)) {
        const sources = copy.args.split(/\s+/).slice(0, -1);
        for (const source of sources) {
          expect(existsSync(join(REPO, source)), source).toBe(true);
          expect(allowed, `${source} is filtered out of the build context`).toContain(source.replace(/\/$/, ''));
        }
      }
    }
    expect(allowed).not.toContain('node_modules');
    expect(allowed).not.toContain('dist');
  });

  it('runs as a numeric non-root user, exposes the default port, has the default entrypoint', () => {
    const user = instructions(runtime, 'USER').at(-1)!.args;
    expect(user).toMatch(/^[1-9]\d*:[1-9]\d*$/); // numeric, so runAsNonRoot can check it
    expect(instructions(runtime, 'EXPOSE').map((i) => i.args)).toEqual([String(DEFAULT_PORT)]);
    expect(instructions(runtime, 'WORKDIR').at(-1)!.args).toBe('/app');
    const entrypoint = instructions(runtime, 'ENTRYPOINT').at(-1)!.exec;
    expect(entrypoint).toEqual(['node', 'bin/mcp-auth-gateway.js', 'serve', '--config', '/etc/mcp-auth-gateway']);
    expect(existsSync(join(REPO, entrypoint![1]!))).toBe(true);
    expect(instructions(runtime, 'CMD')).toEqual([]);
  });

  it('imports at run time only production dependencies and Node built-ins', async () => {
    const cli = await buildGatewayCli();
    const files = (await readdir(join(cli.root, 'dist'), { recursive: true })).filter((f) => f.endsWith('.js'));
    const imported = new Set<string>();
    for (const file of files) {
      const code = await readFile(join(cli.root, 'dist', file), 'utf8');
      // Statements only: an error message saying `differs from "x"` is not an import.
      for (const m of code.matchAll(IMPORT_SPECIFIERS)) imported.add((m[1] ?? m[2] ?? m[3])!);
    }
    const packages = [...imported].filter((s) => !s.startsWith('node:') && !builtinModules.includes(s)).map((s) => (s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0]!));
    expect(packages.length).toBeGreaterThan(3);
    expect(packages.filter((p) => !(p in pkg.dependencies))).toEqual([]);
  });
});

describe('the HEALTHCHECK command', () => {
  let cli: GatewayCli;
  let gateway: GatewayProcess;
  let healthcheck: string[];

  beforeAll(async () => {
    const check = instructions(runtime, 'HEALTHCHECK').at(-1)!;
    expect(check.flags).toMatchObject({ interval: expect.any(String), timeout: expect.any(String) });
    healthcheck = check.exec!;
    expect(healthcheck[0]).toBe('node'); // the slim image has no curl or wget
    cli = await buildGatewayCli();
    const dir = await writeConfigDir({
      'gateway.yaml': 'public_url: https://mcp.example.com\nroutes:\n  - { path: /mcp, upstream: "http://127.0.0.1:1/mcp", authorization_servers: ["https://idp.example.com"], token: { jwt: { issuer: "https://idp.example.com" } } }\n',
    });
    gateway = await spawnGateway(cli, { configDir: dir, env: { HOST: '127.0.0.1', PORT: String(await freePort()) } });
  });

  afterAll(async () => {
    await gateway?.stop();
  });

  const run = async (env: Record<string, string>) => {
    try {
      await promisify(execFile)(process.execPath, healthcheck.slice(1), { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 10_000 });
      return 0;
    } catch (err) {
      return (err as { code?: number }).code;
    }
  };

  it('exits 0 against a running gateway on $PORT (default 8080) and 1 when nothing answers', async () => {
    expect(await run({ PORT: String(gateway.port) })).toBe(0);
    expect(await run({ PORT: String(await freePort()) })).toBe(1);
    expect(healthcheck.join(' ')).toContain(`|| ${DEFAULT_PORT})`);
    expect(healthcheck.join(' ')).toContain('/healthz');
  });
});
