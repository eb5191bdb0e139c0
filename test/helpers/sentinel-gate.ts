// A TCP relay in front of a Redis Sentinel that can hold back clients'
// lookups of the primary (SENTINEL get-master-addr-by-name: the request is
// swallowed, so the client's lookup times out) while passing everything else
// through, and tells when a failover announcement (+switch-master) went by.
// It lets a test put the Sentinel's announcement in the middle of a client's
// lookup, which otherwise happens only by chance on a loaded machine.
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

export interface SentinelGate {
  port: number;
  /** While true, lookups of the primary get no answer. */
  holdLookups: boolean;
  /** Resolves at the first lookup held back. */
  lookupHeld: Promise<void>;
  /** Resolves once a subscriber was sent +switch-master. */
  switchAnnounced: Promise<void>;
  /** Resolves once a client subscribed to +switch-master (ioredis's failoverDetector). */
  subscribed: Promise<void>;
  close(): Promise<void>;
}

function signal(): { promise: Promise<void>; fire: () => void } {
  let fire!: () => void;
  const promise = new Promise<void>((resolve) => (fire = resolve));
  return { promise, fire };
}

export async function startSentinelGate(sentinelPort: number): Promise<SentinelGate> {
  const held = signal();
  const announced = signal();
  const subscribed = signal();
  const sockets = new Set<Socket>();
  const gate: SentinelGate = { port: 0, holdLookups: false, lookupHeld: held.promise, switchAnnounced: announced.promise, subscribed: subscribed.promise, close };
  const server = createServer((client) => {
    const upstream = connect(sentinelPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (chunk: Buffer) => {
      const text = chunk.toString('latin1').toLowerCase();
      if (text.includes('+switch-master')) subscribed.fire();
      if (gate.holdLookups && text.includes('get-master-addr-by-name')) return held.fire();
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (chunk.toString('latin1').includes('message') && chunk.toString('latin1').includes('+switch-master')) announced.fire();
      client.write(chunk);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  gate.port = (server.address() as AddressInfo).port;
  return gate;

  async function close() {
    const closed = once(server, 'close');
    server.close();
    sockets.forEach((s) => s.destroy());
    await closed;
  }
}
