// A TCP relay that can go silent: while `silent`, bytes in either direction are
// dropped and nothing is closed, as a load balancer or NAT does when its idle
// timeout forgets a connection (no FIN, no RST; the peers' kernels retransmit).
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

export interface BlackholeRelay {
  port: number;
  /** While true, nothing passes and nothing is closed. */
  silent: boolean;
  close(): Promise<void>;
}

export async function startBlackholeRelay(targetPort: number): Promise<BlackholeRelay> {
  const sockets = new Set<Socket>();
  const relay: BlackholeRelay = { port: 0, silent: false, close };
  const server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
      sockets.add(from);
      from.on('error', () => {});
      from.on('close', () => {
        sockets.delete(from);
        to.destroy();
      });
      from.on('data', (chunk: Buffer) => {
        if (!relay.silent) to.write(chunk);
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  relay.port = (server.address() as AddressInfo).port;
  async function close(): Promise<void> {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  return relay;
}
