import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { WEBSOCKET_SUBSCRIPTIONS_PATH, type WebSocketSubscriptions } from './websocket-subscriptions';

/**
 * A bind message is a token and a few words; Medplum allows its JSON body limit, a few KiB suffice here
 * and bound what a socket may make the server hold.
 */
const MAX_MESSAGE_BYTES = 64 * 1024;

/**
 * Serves `ws/subscriptions-r4` on a Node HTTP server (the embedded Medplum's port: main.ts,
 * thread-entry.ts), on its `upgrade` event as Medplum does (packages/server/src/ws/routes.ts): the
 * handshake is accepted from anyone and each binding is checked on its own (websocket-subscriptions.ts).
 * Any other upgrade is 404, a server at its socket bounds 503, both before the handshake. Node only:
 * nothing the Worker entry imports reaches this file.
 */
export function serveWebSocketSubscriptions(server: Server, subscriptions: WebSocketSubscriptions): void {
  const sockets = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });
  server.on('upgrade', (request, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    if (path !== WEBSOCKET_SUBSCRIPTIONS_PATH || request.headers.upgrade?.toLowerCase() !== 'websocket') {
      refuse(socket, '404 Not Found');
      return;
    }
    const address = request.socket.remoteAddress ?? '';
    if (!subscriptions.admits(address)) {
      refuse(socket, '503 Service Unavailable');
      return;
    }
    sockets.handleUpgrade(request, socket, head, (ws) => {
      const connection = subscriptions.open(
        {
          send: (text) => ws.send(text),
          get bufferedAmount() {
            return ws.bufferedAmount;
          },
          close: (code, reason) => ws.close(code, reason),
          terminate: () => ws.terminate(),
        },
        address,
      );
      // Text or binary frames alike, read as text (Medplum reads both).
      ws.on('message', (data: Buffer) => connection.receive(data.toString('utf8')));
      ws.on('close', () => connection.closed());
      // A broken socket closes; without a listener its error would end the process.
      ws.on('error', () => undefined);
    });
  });
  server.on('close', () => sockets.close());
}

function refuse(socket: Duplex, status: string): void {
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}
