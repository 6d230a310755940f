import { createServer } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { freePort, freePortTop } from '../support/spawn.ts';

const top = freePortTop();

describe('freePort (the test servers\' ports)', () => {
  afterEach(() => vi.restoreAllMocks());

  it('never hands out 10080, which fetch refuses ("bad port"), even when its random pick lands there', async () => {
    // The first pick lands on 10080; the next ones are random again.
    vi.spyOn(Math, 'random').mockReturnValueOnce(80.5 / (top - 10_000));
    const port = await freePort();
    expect(port).not.toBe(10080);
    // What the port is for: a server there that fetch reaches.
    const server = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    try {
      expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe('ok');
    } finally {
      server.close();
    }
  });
});
