// `upstream.stdio.sandbox` and `upstream.stdio.user`: what loads (names resolved,
// paths kept) and each refusal at its line: a relative or missing path, an unknown
// kind or key, an unknown user or group, root as the user, and a gateway that
// cannot switch users.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/config-error.js';
import { describeRoutes } from '../../src/config/describe.js';
import { lookupGroup, lookupUser, missingUserSwitchCapabilities } from '../../src/config/os-users.js';
import { resolveUser, type IsolationProblem } from '../../src/config/stdio-isolation.js';

const GATEWAY = 'listen: { host: 127.0.0.1, port: 9000 }\npublic_url: http://127.0.0.1:9000\nauthorization_server:\n  enabled: true\n';
const root = process.geteuid?.() === 0;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-config-isolation-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(stdio: string) {
  await writeFile(join(dir, 'gateway.yaml'), GATEWAY);
  await writeFile(join(dir, 'a.yaml'), `path: /a/mcp\nupstream:\n  stdio:\n    command: node\n${stdio}`);
  return loadConfig(dir, {});
}

async function errorsOf(stdio: string): Promise<string[]> {
  const err = await load(stdio).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).message.split('\n').map((line) => line.replace(`${dir}/`, ''));
}

describe('upstream.stdio.sandbox', () => {
  it('loads with its defaults: nothing more readable or writable, the network shared; check names it', async () => {
    const config = await load('    sandbox: { kind: bubblewrap }\n');
    expect(config.routes[0]?.stdio?.sandbox).toEqual({ kind: 'bubblewrap', readable: [], writable: [], network: true });
    expect(describeRoutes(config)).toMatch(/\/a\/mcp → stdio:node .* sandbox=bubblewrap user=the gateway's$/m);
    expect(describeRoutes(await load(''))).toMatch(/ sandbox=none user=the gateway's$/m);
    const custom = await load(`    sandbox: { kind: bubblewrap, readable: [/usr/share], writable: ["${dir}"], network: false }\n`);
    expect(custom.routes[0]?.stdio?.sandbox).toEqual({ kind: 'bubblewrap', readable: ['/usr/share'], writable: [dir], network: false });
  });

  it.each([
    ['    sandbox: { kind: firejail }\n', /^a\.yaml:5:\d+: upstream\.stdio\.sandbox\.kind: the sandbox kind is bubblewrap$/],
    ['    sandbox: { kind: bubblewrap, readable: [relative/dir] }\n', /^a\.yaml:5:\d+: upstream\.stdio\.sandbox\.readable\[0\]: an absolute path/],
    ['    sandbox: { kind: bubblewrap, writable: [/srv/../etc] }\n', /^a\.yaml:5:\d+: upstream\.stdio\.sandbox\.writable\[0\]: a path here has no \.\. segments/],
    ['    sandbox: { kind: bubblewrap, readable: [/no/such/dir/anywhere] }\n', /^a\.yaml:5:\d+: upstream\.stdio\.sandbox\.readable\[0\]: \/no\/such\/dir\/anywhere does not exist/],
    ['    sandbox: { kind: bubblewrap, network: "no" }\n', /^a\.yaml:5:\d+: upstream\.stdio\.sandbox\.network: .*expected boolean/],
    ['    sandbox: { kind: bubblewrap, seccomp: true }\n', /^a\.yaml:5:\d+: upstream\.stdio\.sandbox\.seccomp: unknown key/],
  ])('refuses %j at its line', async (stdio, expected) => {
    expect((await errorsOf(stdio)).some((line) => expected.test(line))).toBe(true);
  });
});

describe.runIf(root)('upstream.stdio.user (the gateway runs as root)', () => {
  it('resolves a user name to its uid and primary group, a group name to its gid, numbers as given', async () => {
    const nobody = await load('    user: { uid: nobody }\n    sandbox: { kind: bubblewrap, network: false }\n');
    expect(nobody.routes[0]?.stdio?.user).toEqual({ uid: 65534, gid: 65534 });
    expect(describeRoutes(nobody)).toMatch(/ sandbox=bubblewrap \(no network\) user=65534:65534$/m);
    expect((await load('    user: { uid: nobody, gid: root }\n')).routes[0]?.stdio?.user).toEqual({ uid: 65534, gid: 0 });
    expect((await load('    user: { uid: 4242, gid: 4242 }\n')).routes[0]?.stdio?.user).toEqual({ uid: 4242, gid: 4242 });
  });

  it.each([
    ['    user: { uid: no-such-user-here }\n', /^a\.yaml:5:\d+: upstream\.stdio\.user\.uid: no user no-such-user-here in \/etc\/passwd$/],
    ['    user: { uid: nobody, gid: no-such-group }\n', /^a\.yaml:5:\d+: upstream\.stdio\.user\.gid: no group no-such-group in \/etc\/group$/],
    ['    user: { uid: 4242 }\n', /^a\.yaml:5:\d+: upstream\.stdio\.user\.gid: uid 4242 is not in \/etc\/passwd: give gid$/],
    ['    user: { uid: root }\n', /^a\.yaml:5:\d+: upstream\.stdio\.user\.uid: uid 0 is root/],
    ['    user: { uid: -1 }\n', /^a\.yaml:5:\d+: upstream\.stdio\.user\.uid: Too small/],
    ['    user: { uid: [1] }\n', /^a\.yaml:5:\d+: upstream\.stdio\.user\.uid: a user or group name, or a number from 0$/],
    ['    user: { gid: 5 }\n', /^a\.yaml:5:\d+: upstream\.stdio\.user\.uid: required, but missing$/],
  ])('refuses %j at its line', async (stdio, expected) => {
    expect((await errorsOf(stdio)).some((line) => expected.test(line))).toBe(true);
  });
});

describe('a gateway that cannot switch users', () => {
  it('refuses user, naming what it lacks and what to do instead', () => {
    const problems: IsolationProblem[] = [];
    expect(resolveUser({ uid: 'nobody' }, (p) => problems.push(p), ['CAP_SETUID', 'CAP_KILL'])).toBeUndefined();
    expect(problems).toEqual([{ path: ['user'], message: expect.stringMatching(/lacks CAP_SETUID, CAP_KILL, so it cannot run processes as another user: run it as root, or grant CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_KILL, CAP_SETGID, CAP_SETUID/) as string }]);
  });

  const status = (capEff: string) => `Name:\tnode\nUid:\t1000\t1000\t1000\t1000\nCapInh:\t0000000000000000\nCapEff:\t${capEff}\nCapBnd:\t000001ffffffffff\n`;
  const all = ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID'];
  it.each([
    [0, status('000001ffffffffff'), []],
    [1000, status('00000000000000eb'), []],
    [1000, status('0000000000000000'), all],
    [1000, status('00000000000000c0'), ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_KILL']],
    // Root in a container whose capabilities were dropped.
    [0, status('0000000000000000'), all],
    [0, status('000000000000006b'), ['CAP_SETUID']],
    [0, 'no status at all', []],
    [1000, 'no status at all', all],
  ])('euid %i with %j lacks %j', (euid, text, expected) => {
    expect(missingUserSwitchCapabilities(euid, text)).toEqual(expected);
  });
});

describe('user and group files', () => {
  it('looks names and numbers up in passwd and group files, skipping comments', async () => {
    await writeFile(join(dir, 'passwd'), '# comment\nmcp:x:1500:1600:MCP:/nonexistent:/usr/sbin/nologin\n');
    await writeFile(join(dir, 'group'), 'mcpgroup:x:1700:\n');
    expect(lookupUser('mcp', join(dir, 'passwd'))).toEqual({ uid: 1500, gid: 1600 });
    expect(lookupUser(1500, join(dir, 'passwd'))).toEqual({ uid: 1500, gid: 1600 });
    expect(lookupUser('other', join(dir, 'passwd'))).toBeUndefined();
    expect(lookupGroup('mcpgroup', join(dir, 'group'))).toBe(1700);
    expect(lookupGroup(12, join(dir, 'group'))).toBe(12);
    expect(lookupUser('mcp', join(dir, 'missing'))).toBeUndefined();
  });
});
