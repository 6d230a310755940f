import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

/** What every line carries. */
const LINE = { base: { service: 'svc' }, timestamp: pino.stdTimeFunctions.isoTime };

/** Field names whose values are secrets, at any depth of a logged object. */
const SECRET_KEY = /pass(word|wd)|secret|token|cookie|authorization|verifier|^sid$/i;
const CENSOR = '[redacted]';
const MAX_DEPTH = 8;

/**
 * A copy of `value` with every secret field censored, however deep (plain objects and arrays; an Error
 * is left to pino's serializer). Runs on every line but the access line, which holds no object.
 */
function redacted(value: unknown, depth = 0, ancestors = new Set<object>()): unknown {
  if (typeof value !== 'object' || value === null || value instanceof Error) return value;
  if (depth > MAX_DEPTH || ancestors.has(value)) return '[not logged: too deep or circular]';
  const plain = Array.isArray(value) || Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null;
  if (!plain) return value;
  // Ancestors only, not every object seen: one object logged under two fields is censored under both.
  ancestors.add(value);
  const copy = Array.isArray(value)
    ? value.map((item) => redacted(item, depth + 1, ancestors))
    : Object.fromEntries(Object.entries(value).map(([key, field]) => [key, SECRET_KEY.test(key) && field !== undefined ? CENSOR : redacted(field, depth + 1, ancestors)]));
  ancestors.delete(value);
  return copy;
}

/**
 * Structured JSON logs (pino). Secrets never reach a log line: request logging records method,
 * path, status and timing only, and a field named like a secret is censored wherever an object carries it.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const logger = pino({ level, ...LINE, formatters: { log: (object) => redacted(object) as Record<string, unknown> } }, destination);
  // The access log line's logger: the same line to the same stream, without the redaction pass.
  accessLoggers.set(logger, pino({ level: 'info', ...LINE }, (logger as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym]));
  return logger;
}

/**
 * The destination of the development log mode (`LOG_PRETTY=1`): pino-pretty's human lines on stdout,
 * written synchronously as pino's own destination is (a fatal line before an exit is not lost). The
 * lines are the same lines, redacted first; only their print changes. pino-pretty is a devDependency, so
 * an installed production package has none: then this resolves to `{ reason }` and the caller logs in
 * JSON, saying so in one line.
 *
 * ```ts
 * const pretty = env.LOG_PRETTY ? await prettyDestination() : undefined;
 * const logger = createLogger('info', pretty?.destination);
 * if (pretty?.reason) logger.warn({ reason: pretty.reason }, 'LOG_PRETTY is set but pino-pretty cannot be loaded: JSON lines');
 * ```
 */
export async function prettyDestination(): Promise<{ destination: DestinationStream; reason?: undefined } | { destination?: undefined; reason: string }> {
  try {
    const { default: pretty } = await import('pino-pretty');
    return { destination: pretty({ sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' }) };
  } catch (err) {
    return { reason: (err as Error).message };
  }
}

/**
 * The access log line's fields are svc's own (id, method, path, status, time), never a secret, and the
 * redaction pass of the main logger (it looks into every field) cost most of the 8 µs that a line took
 * in a microbenchmark (5.8 µs with pino's path redaction): on the local-cache path, a quarter of the
 * request's CPU at `info`.
 */
const accessLoggers = new WeakMap<Logger, Logger>();

/**
 * The access log line of a request, at `info` (`started`: `performance.now()` when it began, 0 when
 * `info` was off then). Both ways svc answers write it: the app (src/app.ts) and the session lane
 * (routes/auth/session.ts).
 */
export function logRequest(logger: Logger, started: number, reqId: string, method: string, path: string, status: number): void {
  if (started) (accessLoggers.get(logger) ?? logger).info({ reqId, method, path: loggedPath(path), status, ms: Math.round(performance.now() - started) }, 'request');
}

/** An asset download's path holds its token, the credential itself (docs/assets.md): not in the log. */
const TOKEN_IN_PATH = /^((?:\/api)?\/auth\/(?:session-)?asset\/)[^/]+/;

/** The path as the access log shows it. */
const loggedPath = (path: string): string => (path.includes('asset/') ? path.replace(TOKEN_IN_PATH, '$1***') : path);

/** `logRequest`'s `started`: now, when `info` is on, else 0 (no line will be written). */
export const requestStarted = (logger: Logger): number => (logger.isLevelEnabled('info') ? performance.now() : 0);
