/** A network cut on loopback, under the test's control (also used by packages/broker's reconnection test). */
import net from 'node:net';

/**
 * A TCP proxy on loopback to `127.0.0.1:targetPort`. `cut()` destroys every connection through it, both sides,
 * and refuses new ones (accepted and destroyed at once) until `restore()`.
 */
export interface TcpProxy {
  readonly port: number;
  /** Connections made through it so far. */
  readonly connections: number;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function tcpProxy(targetPort: number): Promise<TcpProxy> {
  const open = new Set<net.Socket>();
  let isCut = false;
  let connections = 0;
  const server = net.createServer((client) => {
    if (isCut) {
      client.destroy();
      return;
    }
    connections += 1;
    const upstream = net.connect(targetPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.setNoDelay(true);
      socket.on('error', () => {});
      socket.on('close', () => {
        open.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const cut = () => {
    isCut = true;
    for (const socket of open) socket.destroy();
    open.clear();
  };
  return {
    port,
    get connections() {
      return connections;
    },
    cut,
    restore() {
      isCut = false;
    },
    async close() {
      cut();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
