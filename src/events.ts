import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';

export type EventListener = (payload: unknown) => void | Promise<void>;

export interface Events {
  on(name: string, listener: EventListener): void;
  emit(name: string, payload: unknown): void;
}

/**
 * Server events (`instance.on` / `instance.emit`). A listener that throws or rejects is logged and
 * never breaks the emitter's request.
 */
export function createEvents(logger: Logger): Events {
  const emitter = new EventEmitter();
  return {
    on(name, listener) {
      emitter.on(name, (payload: unknown) => {
        Promise.resolve()
          .then(() => listener(payload))
          .catch((err: unknown) => logger.error({ event: name, err }, 'event listener failed'));
      });
    },
    emit(name, payload) {
      emitter.emit(name, payload);
    },
  };
}
