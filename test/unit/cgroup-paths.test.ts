/**
 * Where the gateway's own cgroups are (src/proxy/stdio/cgroup-paths.ts), read from
 * /proc/self/cgroup and /proc/self/mountinfo as a host shows them, never assumed: a hybrid host
 * (v1 controllers each in a hierarchy, some mounted together, a unified hierarchy beside them),
 * a pure cgroup v2 host, a container that sees only a subtree, and paths with escaped spaces.
 */
import { describe, expect, it } from 'vitest';
import { parseOwnV1Dirs, parseOwnV2Dir } from '../../src/proxy/stdio/cgroup-paths.js';

const WANTED = ['freezer', 'pids', 'memory', 'cpu'];

// This machine's shape (a hybrid host) with cpu and cpuacct mounted together, as many distributions do.
const HYBRID_CGROUP = ['9:name=systemd:/', '8:pids:/', '6:freezer:/', '4:memory:/process_api/dd07', '2:cpu,cpuacct:/svc', '0::/'].join('\n');
const HYBRID_MOUNTS = [
  '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct',
  '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer',
  '39 31 0:36 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids',
  '40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
].join('\n');

describe('the gateway\'s own cgroups, from /proc', () => {
  it('a hybrid host: each v1 controller in its own hierarchy (cpu with cpuacct), the unified one beside them', () => {
    expect(Object.fromEntries(parseOwnV1Dirs(HYBRID_CGROUP, HYBRID_MOUNTS, WANTED))).toEqual({
      pids: '/sys/fs/cgroup/pids',
      freezer: '/sys/fs/cgroup/freezer',
      memory: '/sys/fs/cgroup/memory/process_api/dd07',
      cpu: '/sys/fs/cgroup/cpu,cpuacct/svc',
    });
    expect(parseOwnV2Dir(HYBRID_CGROUP, HYBRID_MOUNTS)).toBe('/sys/fs/cgroup/unified');
  });

  it('a cgroup v2 host: no v1 hierarchy, the unified one at /sys/fs/cgroup', () => {
    const mounts = '30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate';
    expect(parseOwnV1Dirs('0::/user.slice/gw.service', mounts, WANTED).size).toBe(0);
    expect(parseOwnV2Dir('0::/user.slice/gw.service', mounts)).toBe('/sys/fs/cgroup/user.slice/gw.service');
  });

  it('a container that sees a subtree: its cgroup found under the mounted root, one outside it not at all', () => {
    const mounts = '40 31 0:36 /kubepods/pod1 /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids';
    expect(parseOwnV1Dirs('8:pids:/kubepods/pod1/ctr', mounts, WANTED).get('pids')).toBe('/sys/fs/cgroup/pids/ctr');
    expect(parseOwnV1Dirs('8:pids:/kubepods/pod2', mounts, WANTED).has('pids')).toBe(false);
  });

  it('escaped mount points, and neither file naming a cgroup: read right, or nothing', () => {
    const mounts = '37 31 0:34 / /mnt/cg\\040v1/freezer rw - cgroup cgroup rw,freezer';
    expect(parseOwnV1Dirs('6:freezer:/a', mounts, WANTED).get('freezer')).toBe('/mnt/cg v1/freezer/a');
    expect(parseOwnV1Dirs('', '', WANTED).size).toBe(0);
    expect(parseOwnV2Dir('', '')).toBeUndefined();
    expect(parseOwnV2Dir('0::/', HYBRID_MOUNTS.split('\n').slice(0, 6).join('\n'))).toBeUndefined();
  });
});
