/**
 * The example policies under policies/: each one loads, decides what its
 * comments promise, and `explain` (in process and as the real CLI) says so
 * with the rule's file:line.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { main } from '../../src/cli.js';
import { evaluateOperation, type PolicyCaller } from '../../src/policy/evaluate.js';
import { compilePolicy, type RoutePolicy } from '../../src/policy/route-policy.js';
import type { Operation } from '../../src/policy/json-rpc.js';

const EXAMPLES = 'policies/examples';

async function loadPolicy(dir: string): Promise<RoutePolicy> {
  const config = await loadConfig(dir, {});
  expect(config.routes).toHaveLength(1);
  return compilePolicy(config.routes[0]!);
}

const who = (scopes: string, more: Partial<PolicyCaller> = {}): PolicyCaller => ({ subject: 'someone', clientId: 'some-client', scopes: scopes.split(' ').filter(Boolean), ...more });
const tool = (name: string): Operation => ({ method: 'tools/call', name });

/** The line (1-based) of the first line of `file` containing `text`. */
const lineOf = (file: string, text: string) => readFileSync(file, 'utf8').split('\n').findIndex((l) => l.includes(text)) + 1;

/** Runs the CLI's main() in process, capturing what it prints. */
async function cli(...args: string[]): Promise<{ code: number | undefined; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((line: unknown) => void out.push(String(line)));
  const error = vi.spyOn(console, 'error').mockImplementation((line: unknown) => void err.push(String(line)));
  try {
    return { code: await main(args), out: out.join('\n'), err: err.join('\n') };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

describe('policies/ itself', () => {
  it('loads the demo route only: example directories are configurations of their own', async () => {
    const config = await loadConfig('policies', {});
    expect(config.routes.map((r) => r.path)).toEqual(['/everything/mcp']);
    const policy = compilePolicy(config.routes[0]!);
    expect(evaluateOperation(policy, tool('toggle-simulated-logging'), who('mcp:read'))).toMatchObject({ allow: false, requiredScopes: ['mcp:read', 'mcp:write'] });
    expect(evaluateOperation(policy, tool('gzip-file-as-resource'), who('mcp:read mcp:write mcp:admin'))).toMatchObject({ allow: false, reason: 'deny' });
    expect(evaluateOperation(policy, tool('echo'), who('mcp:read')).allow).toBe(true);
  });
});

describe('example: read-only vs write tools', () => {
  const dir = `${EXAMPLES}/read-only-tools`;
  const file = `${dir}/github.yaml`;

  it('lets a reader read, asks a writer for mcp:write, and denies run_shell to everyone', async () => {
    const policy = await loadPolicy(dir);
    expect(evaluateOperation(policy, tool('get_file_contents'), who('mcp:read'))).toMatchObject({ allow: true, reason: 'route' });
    expect(evaluateOperation(policy, { method: 'tools/list' }, who('mcp:read')).allow).toBe(true);
    for (const name of ['create_issue', 'update_issue', 'delete_repo', 'merge_pull_request']) {
      expect(evaluateOperation(policy, tool(name), who('mcp:read'))).toMatchObject({ allow: false, reason: 'scope', requiredScopes: ['mcp:read', 'mcp:write'] });
      expect(evaluateOperation(policy, tool(name), who('mcp:read mcp:write')).allow).toBe(true);
    }
    expect(evaluateOperation(policy, tool('run_shell'), who('mcp:read mcp:write'))).toMatchObject({ allow: false, reason: 'deny' });
    // Globs are case-sensitive and stay whole: `Delete_repo` and `undelete_repo` are not write tools here.
    expect(evaluateOperation(policy, tool('undelete_repo'), who('mcp:read')).allow).toBe(true);
    expect(evaluateOperation(policy, { method: 'tools/call', name: 'anything' }, who('')).allow).toBe(false);
  });

  it('explain names the rule by file:line', async () => {
    const { code, out } = await cli('explain', '--config', dir, '--route', '/github/mcp', '--method', 'tools/call', '--tool', 'delete_repo', '--scopes', 'mcp:read');
    expect(code).toBe(0);
    expect(out).toContain('decision  deny');
    expect(out).toContain(`${file}:${lineOf(file, 'tool: "delete_*"')} rules[3]`);
    expect(out).toContain('needs     mcp:read mcp:write');
    const allowed = await cli('explain', '--config', dir, '--route', '/github/mcp', '--tool', 'delete_repo', '--scopes', 'mcp:read,mcp:write', '--json');
    expect(JSON.parse(allowed.out)).toMatchObject({ decision: 'allow', reason: 'rule', rule: { index: 3, source: `${file}:${lineOf(file, 'tool: "delete_*"')}` } });
  });
});

describe('example: admin-only tools', () => {
  const dir = `${EXAMPLES}/admin-only-tools`;
  const file = `${dir}/ops.yaml`;

  it('needs mcp:admin and a named administrator; secrets and admin prompts need mcp:admin', async () => {
    const policy = await loadPolicy(dir);
    const admin = 'mcp:read mcp:admin';
    expect(evaluateOperation(policy, tool('admin_restart'), who(admin, { subject: 'alice@example.com' })).allow).toBe(true);
    expect(evaluateOperation(policy, tool('admin_restart'), who(admin, { subject: 'mallory@example.com' }))).toMatchObject({ allow: false, reason: 'subject' });
    expect(evaluateOperation(policy, tool('admin_restart'), who('mcp:read', { subject: 'bob@example.com' }))).toMatchObject({ allow: false, reason: 'scope', requiredScopes: ['mcp:read', 'mcp:admin'] });
    expect(evaluateOperation(policy, { method: 'resources/read', name: 'secret://db/prod/password' }, who('mcp:read'))).toMatchObject({ allow: false, reason: 'scope' });
    expect(evaluateOperation(policy, { method: 'resources/read', name: 'secret://db/prod/password' }, who(admin)).allow).toBe(true);
    expect(evaluateOperation(policy, { method: 'resources/read', name: 'file:///status' }, who('mcp:read')).allow).toBe(true);
    expect(evaluateOperation(policy, { method: 'prompts/get', name: 'admin_runbook' }, who('mcp:read')).allow).toBe(false);
    // Closed by default: an unexpected admin tool is denied even to administrators.
    expect(evaluateOperation(policy, tool('reset_admin_cache'), who(admin, { subject: 'alice@example.com' }))).toMatchObject({ allow: false, reason: 'deny' });
    expect(evaluateOperation(policy, tool('status'), who('mcp:read')).allow).toBe(true);
  });

  it('explain says the subject is not allowed', async () => {
    const { code, out } = await cli('explain', '--config', dir, '--route', '/ops/mcp', '--tool', 'admin_restart', '--scopes', 'mcp:read mcp:admin', '--subject', 'mallory@example.com');
    expect(code).toBe(0);
    expect(out).toContain('decision  deny');
    expect(out).toContain(`${file}:${lineOf(file, 'tool: "admin_*"')} rules[0]`);
    expect(out).toContain('allow_subjects');
  });
});

describe('example: client allow-list', () => {
  const dir = `${EXAMPLES}/client-allow-list`;
  const file = `${dir}/deploy.yaml`;

  it('lets only the CI client deploy, with mcp:write; other tools stay open', async () => {
    const policy = await loadPolicy(dir);
    const write = 'mcp:read mcp:write';
    expect(evaluateOperation(policy, tool('deploy_production'), who(write, { clientId: 'ci-pipeline' })).allow).toBe(true);
    expect(evaluateOperation(policy, tool('deploy_production'), who(write, { clientId: 'claude-desktop' }))).toMatchObject({ allow: false, reason: 'client' });
    expect(evaluateOperation(policy, tool('deploy_production'), who('mcp:read', { clientId: 'ci-pipeline' }))).toMatchObject({ allow: false, reason: 'scope' });
    expect(evaluateOperation(policy, tool('rollback'), who(write, { clientId: 'release-manager-cli' })).allow).toBe(true);
    expect(evaluateOperation(policy, tool('rollback'), who(write, { clientId: 'claude-desktop' })).allow).toBe(false);
    expect(evaluateOperation(policy, tool('list_deployments'), who('mcp:read', { clientId: 'claude-desktop' })).allow).toBe(true);
  });

  it('explain, as the real CLI process, prints the decision and exits 0', async () => {
    const run = promisify(execFile);
    const entry = `const { main } = await import(${JSON.stringify(new URL('../../src/cli.ts', import.meta.url).pathname)}); process.exitCode = await main(process.argv.slice(1));`;
    const args = ['--import', 'tsx', '--input-type=module', '-e', entry, '--', 'explain', '--config', dir, '--route', '/deploy/mcp', '--tool', 'deploy_production', '--scopes', 'mcp:read,mcp:write', '--client', 'claude-desktop'];
    const { stdout } = await run(process.execPath, args);
    expect(stdout).toContain('decision  deny');
    expect(stdout).toContain(`${file}:${lineOf(file, 'tool: "deploy_*"')} rules[0]`);
    expect(stdout).toContain('the client is not in allow_clients');

    // Usage errors exit 2, configuration errors 1.
    const usage = await run(process.execPath, [...args.slice(0, 6), 'explain', '--config', dir, '--method', 'tools/call']).catch((e: { code: number; stderr: string }) => e);
    expect(usage).toMatchObject({ code: 2 });
    const broken = await run(process.execPath, [...args.slice(0, 6), 'explain', '--config', '/nonexistent', '--route', '/x', '--method', 'ping']).catch((e: { code: number; stderr: string }) => e);
    expect(broken).toMatchObject({ code: 1, stderr: expect.stringContaining('/nonexistent') });
  });
});
