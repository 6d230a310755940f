// The test logger is silent; OAuth tests still want to know why a login failed. `OAuth login failed`
// warnings carry the reason (which check refused a token, which host a refused redirect pointed at).

import type { ServerInstance } from '../../src/instance.ts';

/** Keeps the `reason` of every warning `instance` logs from now on; returns the (live) list. */
export function loginFailures(instance: ServerInstance): string[] {
  const failures: string[] = [];
  const warn = instance.logger.warn.bind(instance.logger);
  instance.logger.warn = ((obj: unknown, ...rest: unknown[]) => {
    const reason = (obj as { reason?: unknown } | null)?.reason;
    if (typeof reason === 'string') failures.push(reason);
    return (warn as (...args: unknown[]) => void)(obj, ...rest);
  }) as typeof instance.logger.warn;
  return failures;
}
