// Where the password-less dev login may run: a gateway nobody else can reach.
// Both ends count: a loopback public_url on a gateway listening on 0.0.0.0 is
// still reachable by anyone on the network, who would sign in as anyone
// (SECURITY J51). HOST and PUBLIC_URL overrides are already in.
import { isLoopbackHost, isLoopbackUrl } from './urls.js';

const LOOPBACK = 'loopback (127.0.0.0/8, ::1 or localhost)';

/** Why the dev login is refused here, or undefined when both the listen address and public_url are loopback. */
export function refuseDevLogin(publicUrl: string, listenHost: string): string | undefined {
  if (!isLoopbackHost(listenHost)) {
    return `the dev login is refused unless listen.host is ${LOOPBACK}; listen.host is ${listenHost}`;
  }
  if (!isLoopbackUrl(publicUrl)) {
    return `the dev login is refused unless public_url is ${LOOPBACK}; its host is ${new URL(publicUrl).host}`;
  }
  return undefined;
}
