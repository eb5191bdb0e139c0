// store.url → the topology ioredis connects to; malformed URLs are refused
// with a message that never repeats the URL (it usually holds a password).
import { describe, expect, it } from 'vitest';
import { parseRedisUrl, RedisUrlError } from '../../src/config/redis-url.js';
import { thrownBy } from '../helpers/rejection.js';

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
    ['redis+sentinel://:secret@s1:26379/m?sentinel_pasword=x', /an unknown query parameter \(known: sentinel_username, sentinel_password\)/],
    ['redis+sentinel://:secret@s1,,s2/m', /host\[:port\] entries/],
    ['redis+cluster://:secret@n1:7000/1', /has no path/],
    ['redis+cluster://:secret@n1:7000?x=1', /no query parameters/],
    ['redis+cluster://:secret@n1:70000', /is not a host\[:port\]/],
    ['redis+cluster://:secret@n1:7000#frag', /malformed/],
    ['redis+cluster://:%zz@n1:7000', /percent-encoding/],
  ])('refuses %s', (url, message) => {
    const error = thrownBy(() => parseRedisUrl(url), RedisUrlError);
    expect(error.message).toMatch(message);
    expect(error.message).toMatch(/^store\.url: /);
    expect(error.message).not.toContain('secret');
  });
});

describe('[J62] no error repeats any part of a password, whatever the URL shape', () => {
  // One canary per piece, so a password cut at any delimiter still leaves one to find.
  const pieces = ['Cn1q', 'Cn2w', 'Cn3e', 'Cn4r', 'Cn5t', 'Cn6y'];
  const passwords = [
    `${pieces[0]}@${pieces[1]}`,
    `${pieces[0]}:${pieces[1]}@${pieces[2]}`,
    `${pieces[0]}/${pieces[1]}`,
    `${pieces[0]}?${pieces[1]}=${pieces[2]}`,
    `${pieces[0]}#${pieces[1]}`,
    `${pieces[0]}@${pieces[1]}:${pieces[2]}/${pieces[3]}?${pieces[4]}#${pieces[5]}`,
    `${pieces[0]}%zz${pieces[1]}`,
    `${pieces[0]}%40${pieces[1]}%3A${pieces[2]}`,
    `${pieces[0]},${pieces[1]}`,
    `${pieces[0]}[${pieces[1]}]`,
    `${pieces[0]} ${pieces[1]}`,
  ];
  const shapes = (password: string) => [
    `redis://user:${password}@host:6379/0`,
    `redis://:${password}@host`,
    `redis://${password}@host:6379`,
    `rediss://u:${password}@h:6380/1`,
    `redis://:${password}@host:notaport/0`,
    `redis://:${password}@[::1/0`,
    `redis://:${password}@host:6379/x`,
    `redis+sentinel://app:${password}@s1:26379,s2/mymaster/0`,
    `rediss+sentinel://:${password}@s1/m?sentinel_password=${password}`,
    `redis+sentinel://:s@s1/m?sentinel_password=${password}&${password}=1`,
    `redis+cluster://:${password}@n1:7000,n2:7001`,
    `rediss+cluster://u:${password}@n1:70000`,
    `redis+cluster://${password}@n1,,n2`,
    `http://:${password}@host`,
  ];
  const urls = passwords.flatMap(shapes);

  it(`${urls.length} URLs: parsed, or refused with a store.url message holding no piece of the password`, () => {
    let refused = 0;
    for (const url of urls) {
      let message: string | undefined;
      try {
        parseRedisUrl(url);
      } catch (err) {
        expect(err, url).toBeInstanceOf(RedisUrlError);
        message = (err as Error).message;
      }
      if (message === undefined) continue;
      refused++;
      expect(message, url).toMatch(/^store\.url: /);
      for (const piece of pieces) expect(message.includes(piece), `${url} → ${message}`).toBe(false);
    }
    // The corpus is mostly malformed: a parser that accepted everything would prove nothing.
    expect(refused).toBeGreaterThan(urls.length / 2);
  });
});
