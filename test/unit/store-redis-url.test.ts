// store.url → the topology ioredis connects to; malformed URLs are refused
// with a message that never repeats the URL (it usually holds a password).
import { describe, expect, it } from 'vitest';
import { parseRedisUrl, RedisUrlError } from '../../src/store/redis-url.js';

describe('parseRedisUrl', () => {
  it('passes redis:// and rediss:// through to ioredis as they are', () => {
    expect(parseRedisUrl('redis://:pw@h:6380/2')).toEqual({ kind: 'standalone', url: 'redis://:pw@h:6380/2' });
    expect(parseRedisUrl('rediss://h')).toEqual({ kind: 'standalone', url: 'rediss://h' });
  });

  it('reads a Sentinel URL: sentinels, master name, database, data-node and sentinel credentials', () => {
    expect(parseRedisUrl('redis+sentinel://app:p%40ss@s1:26380,s2,[::1]:26381/mymaster/3?sentinel_password=sp&sentinel_username=su')).toEqual({
      kind: 'sentinel',
      tls: false,
      sentinels: [
        { host: 's1', port: 26380 },
        { host: 's2', port: 26379 },
        { host: '::1', port: 26381 },
      ],
      masterName: 'mymaster',
      db: 3,
      username: 'app',
      password: 'p@ss',
      sentinelUsername: 'su',
      sentinelPassword: 'sp',
    });
    expect(parseRedisUrl('rediss+sentinel://:pw@s1/primary')).toEqual({
      kind: 'sentinel',
      tls: true,
      sentinels: [{ host: 's1', port: 26379 }],
      masterName: 'primary',
      db: 0,
      password: 'pw',
    });
  });

  it('reads a Cluster URL: seed nodes and credentials', () => {
    expect(parseRedisUrl('redis+cluster://u:pw@n1:7000,n2:7001,n3')).toEqual({
      kind: 'cluster',
      tls: false,
      nodes: [
        { host: 'n1', port: 7000 },
        { host: 'n2', port: 7001 },
        { host: 'n3', port: 6379 },
      ],
      username: 'u',
      password: 'pw',
    });
    expect(parseRedisUrl('rediss+cluster://n1:7000/0')).toMatchObject({ kind: 'cluster', tls: true, nodes: [{ host: 'n1', port: 7000 }] });
  });

  it.each([
    ['http://h:6379', /expected redis:\/\//],
    ['redis+sentinel://:secret@s1:26379', /names the master group/],
    ['redis+sentinel://:secret@s1:26379/m/x', /database .* must be a number/],
    ['redis+sentinel://:secret@s1:26379/m/0/extra', /names the master group/],
    ['redis+sentinel://:secret@s1:26379/m?sentinel_pasword=x', /unknown query parameter sentinel_pasword/],
    ['redis+sentinel://:secret@s1,,s2/m', /host\[:port\] entries/],
    ['redis+cluster://:secret@n1:7000/1', /has no path/],
    ['redis+cluster://:secret@n1:7000?x=1', /no query parameters/],
    ['redis+cluster://:secret@n1:70000', /is not a host\[:port\]/],
    ['redis+cluster://:secret@n1:7000#frag', /malformed/],
    ['redis+cluster://:%zz@n1:7000', /percent-encoding/],
  ])('refuses %s', (url, message) => {
    let error: unknown;
    try {
      parseRedisUrl(url);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(RedisUrlError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).toMatch(/^store\.url: /);
    expect((error as Error).message).not.toContain('secret');
  });
});
