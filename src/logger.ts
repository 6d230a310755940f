import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

/**
 * Structured JSON logs (pino). Secrets never reach a log line: request logging records method,
 * path, status and timing only, and these paths are censored should an object carry them anyway.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'svc' },
      redact: {
        paths: [
          'password',
          '*.password',
          'clientSecret',
          '*.clientSecret',
          'accessToken',
          'refreshToken',
          '*.accessToken',
          '*.refreshToken',
          'headers.cookie',
          'headers.authorization',
          'sid',
        ],
        censor: '[redacted]',
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

/**
 * The access log line of a request, at `info` (`started`: `performance.now()` when it began, 0 when
 * `info` was off then). Both ways svc answers write it: the app (src/app.ts) and the session lane
 * (routes/auth/session.ts).
 */
export function logRequest(logger: Logger, started: number, reqId: string, method: string, path: string, status: number): void {
  if (started) logger.info({ reqId, method, path, status, ms: Math.round(performance.now() - started) }, 'request');
}

/** `logRequest`'s `started`: now, when `info` is on, else 0 (no line will be written). */
export const requestStarted = (logger: Logger): number => (logger.isLevelEnabled('info') ? performance.now() : 0);
