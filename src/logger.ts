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
