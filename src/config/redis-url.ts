// Reads `store.url` into the topology ioredis should connect to:
//   redis[s]://[[user]:password@]host[:port][/db]                     one primary
//   redis[s]+sentinel://[[user]:password@]host[:port][,host[:port]...]/<master name>[/db]
//       [?sentinel_username=...&sentinel_password=...]                 a Sentinel-managed primary
//   redis[s]+cluster://[[user]:password@]host[:port][,host[:port]...]  Redis Cluster seed nodes
// Credentials in the authority are the data nodes' (primary, replicas, cluster
// nodes); a Sentinel's own credentials go in the query. Errors never repeat any
// part of the URL, not even a host or a query name: a password with an
// unencoded `@`, `/`, `?` or `#` moves its pieces into those (SECURITY J62).
// In config/ (a setting's syntax): `check` refuses a bad URL; store/ connects to what it reads.

export interface RedisNodeAddress {
  host: string;
  port: number;
}

interface Credentials {
  username?: string;
  password?: string;
}

export type RedisTopology =
  | { kind: 'standalone'; url: string }
  | ({ kind: 'sentinel'; tls: boolean; sentinels: RedisNodeAddress[]; masterName: string; db: number; sentinelUsername?: string; sentinelPassword?: string } & Credentials)
  | ({ kind: 'cluster'; tls: boolean; nodes: RedisNodeAddress[] } & Credentials);

export class RedisUrlError extends Error {
  override readonly name = 'RedisUrlError';
}

const DEFAULT_SENTINEL_PORT = 26379;
const DEFAULT_REDIS_PORT = 6379;
const SENTINEL_QUERY = new Set(['sentinel_username', 'sentinel_password']);
// scheme, authority (userinfo up to its last `@`, then the host list), path, query
const MULTI_HOST_URL = /^(rediss?)\+(sentinel|cluster):\/\/(?:([^/?#]*)@)?([^@/?#]*)(\/[^?#]*)?(?:\?([^#]*))?$/i;
const MALFORMED = 'store.url: malformed URL (a `#`, or a `@`, `/` or `?` in a password that is not percent-encoded?)';

export function parseRedisUrl(url: string): RedisTopology {
  const scheme = /^([a-z0-9+.-]+):\/\//i.exec(url)?.[1]?.toLowerCase();
  if (scheme === 'redis' || scheme === 'rediss') return checkStandalone(url);
  if (scheme !== undefined && /^rediss?\+(sentinel|cluster)$/.test(scheme)) return parseMultiHost(url);
  throw new RedisUrlError('store.url: expected redis://, rediss://, redis+sentinel:// or redis+cluster://');
}

/** ioredis reads redis[s]:// itself: only what it would misread or echo in its own error is refused here. */
function checkStandalone(url: string): RedisTopology {
  if (url.includes('#') || !URL.canParse(url)) throw new RedisUrlError(MALFORMED);
  const parsed = new URL(url);
  if (parsed.hostname === '') throw new RedisUrlError('store.url: the URL names no host');
  if (!/^(?:\/\d{0,5})?$/.test(parsed.pathname)) throw new RedisUrlError('store.url: the path of a redis:// URL is a database number (or a password holds an unencoded `/`)');
  if (parsed.search !== '') throw new RedisUrlError('store.url: a redis:// URL takes no query (or a password holds an unencoded `?`)');
  decode(parsed.username, 'user name');
  decode(parsed.password, 'password');
  return { kind: 'standalone', url };
}

function parseMultiHost(url: string): RedisTopology {
  const match = MULTI_HOST_URL.exec(url);
  if (!match || url.includes('#')) throw new RedisUrlError(MALFORMED);
  const [, base = '', mode = '', userinfo, hostList = '', path = '', query = ''] = match;
  const tls = base.toLowerCase() === 'rediss';
  const credentials = parseUserinfo(userinfo);
  if (mode.toLowerCase() === 'cluster') {
    const nodes = parseHosts(hostList, DEFAULT_REDIS_PORT);
    // A cluster has only database 0 and no master name.
    if (path !== '' && path !== '/' && path !== '/0') throw new RedisUrlError('store.url: a Redis Cluster URL has no path (Cluster has database 0 only)');
    if (query !== '') throw new RedisUrlError('store.url: a Redis Cluster URL takes no query parameters');
    return { kind: 'cluster', tls, nodes, ...credentials };
  }
  const sentinels = parseHosts(hostList, DEFAULT_SENTINEL_PORT);
  const [masterName = '', db = '0', ...extra] = path.split('/').slice(1);
  if (masterName === '' || extra.length > 0) throw new RedisUrlError('store.url: a Sentinel URL names the master group as its path: redis+sentinel://host:26379/<master name>[/db]');
  if (!/^\d{1,5}$/.test(db)) throw new RedisUrlError('store.url: the database after the master name must be a number');
  const params = new URLSearchParams(query);
  for (const name of params.keys()) {
    if (!SENTINEL_QUERY.has(name)) throw new RedisUrlError(`store.url: an unknown query parameter (known: ${[...SENTINEL_QUERY].join(', ')})`);
  }
  return {
    kind: 'sentinel',
    tls,
    sentinels,
    masterName: decode(masterName, 'master name'),
    db: Number(db),
    ...credentials,
    ...(params.has('sentinel_username') && { sentinelUsername: params.get('sentinel_username') as string }),
    ...(params.has('sentinel_password') && { sentinelPassword: params.get('sentinel_password') as string }),
  };
}

function parseUserinfo(userinfo: string | undefined): Credentials {
  if (userinfo === undefined || userinfo === '') return {};
  const colon = userinfo.indexOf(':');
  // `password@` alone is how redis:// URLs are often written too: treat a lone part as the password.
  const username = colon < 0 ? '' : decode(userinfo.slice(0, colon), 'user name');
  const password = decode(colon < 0 ? userinfo : userinfo.slice(colon + 1), 'password');
  return { ...(username !== '' && { username }), ...(password !== '' && { password }) };
}

function parseHosts(list: string, defaultPort: number): RedisNodeAddress[] {
  const entries = list.split(',');
  if (entries.some((e) => e.trim() === '')) throw new RedisUrlError('store.url: expected host[:port] entries separated by commas');
  return entries.map((entry, i) => {
    const notAHost = () => new RedisUrlError(`store.url: host ${i + 1} of ${entries.length} is not a host[:port]`);
    if (!URL.canParse(`redis://${entry.trim()}`)) throw notAHost();
    const parsed = new URL(`redis://${entry.trim()}`);
    if (parsed.pathname !== '' || parsed.username !== '' || parsed.password !== '' || parsed.hostname === '') throw notAHost();
    // WHATWG keeps IPv6 brackets in hostname; sockets want the bare address.
    const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
    return { host, port: parsed.port === '' ? defaultPort : Number(parsed.port) };
  });
}

function decode(value: string, what: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    throw new RedisUrlError(`store.url: the ${what} is not valid percent-encoding`);
  }
}
