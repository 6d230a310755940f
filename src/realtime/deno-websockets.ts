/**
 * WebSockets for socket.io on `Deno.serve` (src/server-deno.ts). @socket.io/bun-engine upgrades a
 * request with Bun's `server.upgrade(request, { headers, data })` and is then told of the socket's
 * open, message and close; its WebSocket transport only calls `send`, `close` and reads `readyState` of
 * the socket it gets, which a standard WebSocket has. So this gives the engine a `server` whose
 * `upgrade` is `Deno.upgradeWebSocket`, and hands back the upgrade's response (Deno's handler must
 * return it; the engine answers an empty one). Polling needs nothing: it is plain `Request`/`Response`.
 */
import type { SocketEngine } from './socket-engine.ts';

interface DenoUpgrade {
  socket: WebSocket;
  response: Response;
}
declare const Deno: { upgradeWebSocket(request: Request): DenoUpgrade };

/** The engine's `server` for one request, and the response to return when it upgraded. */
export function denoUpgrades(engine: SocketEngine): { server: unknown; upgraded(): Response | undefined } {
  let response: Response | undefined;
  const server = {
    upgrade(request: Request, options: { headers?: Headers; data: unknown }): boolean {
      const upgrade = Deno.upgradeWebSocket(request);
      for (const [name, value] of options.headers ?? []) upgrade.response.headers.set(name, value);
      const ws = Object.assign(upgrade.socket, { data: options.data });
      upgrade.socket.binaryType = 'arraybuffer';
      // Bun opens the socket inside `upgrade`, so the engine's first packet (`open`, queued right after)
      // finds it writable; Deno opens it once the answer is out: what was queued meanwhile goes now, as the
      // engine sends its queue whenever the transport says it can take more (`drain`).
      upgrade.socket.onopen = () => {
        engine.onWebSocketOpen(ws);
        (options.data as { transport: { emitReserved(event: 'drain'): void } }).transport.emitReserved('drain');
      };
      upgrade.socket.onmessage = (event: MessageEvent) =>
        engine.onWebSocketMessage(ws, typeof event.data === 'string' ? event.data : Buffer.from(event.data as ArrayBuffer));
      upgrade.socket.onclose = (event: CloseEvent) => engine.onWebSocketClose(ws, event.code, event.reason);
      response = upgrade.response;
      return true;
    },
  };
  return { server, upgraded: () => response };
}
