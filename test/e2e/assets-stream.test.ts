// Asset downloads stream (CONTRACT section 6): a 200 MB asset goes through a real svc process
// without being held in memory. The child's resident memory (/proc/<pid>/status VmRSS) is sampled
// during the download; a control download of an asset the resolver holds in memory shows that the
// measurement would see 200 MB if svc buffered.

import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReadySvc, stopAll, type SvcProcess } from '../support/spawn.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MB = 1024 * 1024;
const SIZE = 200 * MB;

const plugin = `import { Hono } from 'hono';
const SIZE = ${SIZE};
const CHUNK = 64 * 1024;
export default (instance) => {
  // Made on demand, chunk by chunk, as a file read would be: nothing here holds more than a chunk.
  instance.auth.registerAssetResolver('big:', async () => {
    let sent = 0;
    const body = new ReadableStream({
      pull(controller) {
        if (sent >= SIZE) return controller.close();
        const n = Math.min(CHUNK, SIZE - sent);
        controller.enqueue(new Uint8Array(n).fill(120));
        sent += n;
      },
    });
    return { body, filename: 'big.bin', contentType: 'application/octet-stream' };
  });
  // The control: the whole asset in memory before the download starts.
  instance.auth.registerAssetResolver('held:', async () => ({ body: new Uint8Array(SIZE).fill(121) }));
  return new Hono();
};
`;

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

describe.skipIf(!existsSync('/proc/self/status'))('asset downloads stream through a real process (RSS)', () => {
  let svc: SvcProcess;
  let cookie: string;
  let appRoot: string;

  beforeAll(async () => {
    mkdirSync(path.join(ROOT, 'test/.tmp'), { recursive: true });
    appRoot = mkdtempSync(path.join(ROOT, 'test/.tmp/stream-')); // inside the repo, so `hono` resolves
    mkdirSync(path.join(appRoot, 'plugins/acme__big'), { recursive: true });
    writeFileSync(path.join(appRoot, 'plugins/acme__big/index.js'), plugin);
    svc = await startReadySvc({ appRoot, env: { SVC_ADMIN_EMAIL: 'big@example.com', SVC_ADMIN_PASSWORD: 'correct horse battery', LOG_LEVEL: 'warn' } });
    const login = await fetch(`${svc.url}/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'big@example.com', password: 'correct horse battery' }),
    });
    expect(login.status).toBe(200);
    cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
  });
  afterAll(async () => {
    await stopAll();
    rmSync(appRoot, { recursive: true, force: true });
  });

  /** Downloads an asset with a fresh single-use token, reading as fast as it comes; returns bytes and the child's peak RSS meanwhile. */
  async function download(assetId: string): Promise<{ bytes: number; peakMb: number; headers: Headers }> {
    const minted = await fetch(`${svc.url}/api/auth/asset-token`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/json' },
      body: JSON.stringify({ assetId, mode: 'single' }),
    });
    expect(minted.status).toBe(201);
    const { url } = (await minted.json()) as { url: string };
    let peakMb = rssMb(svc.pid);
    const sampler = setInterval(() => (peakMb = Math.max(peakMb, rssMb(svc.pid))), 20);
    try {
      const res = await fetch(`${svc.url}${url}`);
      expect(res.status).toBe(200);
      let bytes = 0;
      const reader = res.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        bytes += value.byteLength;
      }
      return { bytes, peakMb: Math.max(peakMb, rssMb(svc.pid)), headers: res.headers };
    } finally {
      clearInterval(sampler);
    }
  }

  it('a 200 MB asset arrives whole while svc\'s RSS grows by far less than its size', { timeout: 120_000 }, async () => {
    await download('big:warm-up'); // first use of the code paths, buffers, JIT
    const before = rssMb(svc.pid);
    const { bytes, peakMb, headers } = await download('big:one');
    expect(bytes).toBe(SIZE);
    expect(headers.get('cache-control')).toBe('no-store');
    expect(headers.get('content-disposition')).toBe('attachment; filename="big.bin"');
    expect(headers.get('content-length')).toBeNull(); // streamed (chunked), not measured in memory first
    const growth = peakMb - before;
    process.stderr.write(`asset stream: RSS ${before.toFixed(0)} MB before, peak ${peakMb.toFixed(0)} MB (+${growth.toFixed(0)} MB) for ${SIZE / MB} MB\n`);
    expect(growth).toBeLessThan(64);
  });

  it('control: an asset held in memory does show up in the same measurement', { timeout: 120_000 }, async () => {
    const before = rssMb(svc.pid);
    const { bytes, peakMb } = await download('held:one');
    expect(bytes).toBe(SIZE);
    expect(peakMb - before).toBeGreaterThan(150);
  });
});
