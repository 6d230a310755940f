import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, logRequest } from '../../src/logger.ts';

/** A logger at `info` whose lines land in the returned array, parsed. */
function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      cb();
    },
  });
  return { lines, logger: createLogger('info', stream) };
}

describe('log redaction (docs/operations.md "Logs")', () => {
  it('censors a secret field at any depth, in arrays too, and leaves the rest and the input as they were', () => {
    const { lines, logger } = capture();
    const input = {
      password: 'p0',
      deep: { a: { password: 'p1', passwd: 'p2', keep: 'visible' } },
      x: { y: { refreshToken: 'r1', idToken: 'i1', token: 't1' } },
      req: { headers: { cookie: 'sid_app=abc', authorization: 'Bearer xyz', host: 'example.com' } },
      cookie: 'c1',
      authorization: 'a1',
      clientSecret: 's1',
      list: [{ accessToken: 'a2' }, { name: 'n' }],
      provider: { codeVerifier: 'v1' },
      sid: 'deadbeef',
      count: 3,
    };
    const before = JSON.stringify(input);
    logger.info(input, 'hello');
    const text = JSON.stringify(lines[0]);
    for (const secret of ['p0', 'p1', 'p2', 'r1', 'i1', 't1', 'sid_app=abc', 'Bearer xyz', 'c1', 'a1', 's1', 'a2', 'v1', 'deadbeef']) expect(text).not.toContain(secret);
    expect(lines[0]).toMatchObject({ msg: 'hello', deep: { a: { password: '[redacted]', keep: 'visible' } }, req: { headers: { host: 'example.com' } }, list: [{ accessToken: '[redacted]' }, { name: 'n' }], count: 3 });
    expect(JSON.stringify(input)).toBe(before);
  });

  it('an Error keeps its message and stack; a cycle does not loop; one object under two fields is censored under both', () => {
    const { lines, logger } = capture();
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic.self = cyclic;
    const shared = { password: 'twice' };
    logger.error({ err: new Error('boom'), cyclic, a: shared, b: shared }, 'failed');
    expect(lines[0]).toMatchObject({ err: { message: 'boom', stack: expect.stringContaining('Error: boom') }, cyclic: { name: 'loop' } });
    expect(JSON.stringify(lines[0])).not.toContain('twice');
  });

  it('the access line carries its own fields as they are', () => {
    const { lines, logger } = capture();
    logRequest(logger, performance.now(), 'req-1', 'GET', '/auth/session', 200);
    expect(lines[0]).toMatchObject({ reqId: 'req-1', method: 'GET', path: '/auth/session', status: 200, msg: 'request' });
  });

  it('an asset download\'s token (the credential, in the path) is not in the access line', () => {
    const { lines, logger } = capture();
    const token = '4Z3roOLw9P0WTp3ikb5EEHLLgDuOUwKOBqR08kmYi2s';
    for (const path of [`/auth/asset/${token}`, `/api/auth/session-asset/${token}`, `/auth/session-asset/${token}/x`]) logRequest(logger, performance.now(), 'r', 'GET', path, 200);
    logRequest(logger, performance.now(), 'r', 'POST', '/auth/asset-token', 200);
    expect(lines.map((l) => l.path)).toEqual(['/auth/asset/***', '/api/auth/session-asset/***', '/auth/session-asset/***/x', '/auth/asset-token']);
    expect(JSON.stringify(lines)).not.toContain(token);
  });
});
