import type { EventEmitter } from 'node:events';
import type { Logger } from '../logger.ts';

type Listener = (...args: unknown[]) => unknown;

/** The EventEmitter methods that add a listener, each patched on the one object (no prototype is touched). */
const ADDERS = ['on', 'addListener', 'once', 'prependListener', 'prependOnceListener'] as const;

/**
 * Guards every listener later added to `target` (a socket, or a namespace for its `connection`
 * listeners): one that throws, or returns a Promise that rejects, is logged with its stack and ends
 * nothing but that event. socket.io calls listeners from its own callbacks (a `process.nextTick` per
 * incoming event), where an error would otherwise end the process: any client could then stop the
 * service with one event to a plugin's listener that has a bug (issue 35: plugin callbacks svc calls
 * are guarded). Each guard carries the original as `.listener`, as Node's `once` wrappers do, so
 * `off(event, original)` still removes it.
 */
export function guardListeners(target: EventEmitter, logger: Logger, what: string): void {
  const guard = (event: string | symbol, listener: Listener): Listener => {
    const report = (err: unknown) => logger.error({ err, event: String(event), where: what }, `realtime: a "${String(event)}" listener failed; that event is dropped, the service goes on`);
    const guarded = function (this: unknown, ...args: unknown[]): unknown {
      try {
        const out = listener.apply(this, args);
        if (out instanceof Promise) out.catch(report);
        return out;
      } catch (err) {
        report(err);
        return undefined;
      }
    };
    return Object.assign(guarded, { listener });
  };
  for (const name of ADDERS) {
    const add = target[name].bind(target) as (event: string | symbol, listener: Listener) => EventEmitter;
    Object.defineProperty(target, name, {
      configurable: true,
      writable: true,
      value: (event: string | symbol, listener: Listener) => add(event, typeof listener === 'function' ? guard(event, listener) : listener),
    });
  }
}
