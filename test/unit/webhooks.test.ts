// Webhook pieces on their own: the URL rule and its address ranges, the connect-time lookup guard, and
// one attempt against real sockets (signature verified with `standardwebhooks`, redirects not followed,
// the 10 s bound, refused and reset connections, an answer cut after a few KB). The routes, the queue
// and delivery end to end: test/e2e/webhooks*.test.ts.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { DELIVERY_TIMEOUT_MS, sendWebhook, signedHeaders } from '../../src/webhooks/send.ts';
import { guardedLookup, isPrivateAddress, PrivateAddressError, webhookUrlProblem } from '../../src/webhooks/url-rule.ts';
import { freePort } from '../support/spawn.ts';

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

describe('the webhook URL rule', () => {
  it('https to a public host passes; without the switch, http and every private, loopback or link-local host are refused', () => {
    for (const ok of ['https://hooks.example.com/svc', 'https://8.8.8.8/x', 'https://[2606:4700::1111]/x', 'https://example.com:8443/a?b=c']) {
      expect(webhookUrlProblem(ok, false), ok).toBeUndefined();
    }
    for (const bad of [
      'http://hooks.example.com/',
      'https://localhost/',
      'https://LOCALHOST./',
      'https://a.b.localhost/',
      'https://127.0.0.1/',
      'https://127.255.255.254/',
      'https://0177.0.0.1/',
      'https://0x7f000001/',
      'https://2130706433/',
      'https://[::1]/',
      'https://[::]/',
      'https://[::ffff:127.0.0.1]/',
      'https://[::ffff:10.0.0.1]/',
      'https://10.1.2.3/',
      'https://172.31.255.255/',
      'https://192.168.0.1/',
      'https://169.254.169.254/',
      'https://100.100.100.200/',
      'https://0.0.0.0/',
      'https://224.0.0.1/',
      'https://[fc00::1]/',
      'https://[fe80::1%25eth0]/',
      'https://[ff02::1]/',
    ]) {
      expect(webhookUrlProblem(bad, false), bad).toBeDefined();
    }
  });

  it('never: another scheme, a user or password, no URL at all (switch or not)', () => {
    for (const allow of [false, true]) {
      for (const bad of ['ftp://example.com/', 'file:///etc/passwd', 'javascript:alert(1)', 'https://u:p@example.com/', 'https://u@example.com/', 'not a url', '']) {
        expect(webhookUrlProblem(bad, allow), `${bad} (${allow})`).toBeDefined();
      }
    }
  });

  it('with SVC_ALLOW_INSECURE_WEBHOOK_URLS: plain http and private addresses', () => {
    for (const ok of ['http://127.0.0.1:8080/hook', 'http://10.0.0.5/hook', 'https://localhost/hook', 'http://receiver.internal/hook']) {
      expect(webhookUrlProblem(ok, true), ok).toBeUndefined();
    }
  });

  it('isPrivateAddress: the ranges, IPv4-mapped IPv6 included; a name is not an address', () => {
    for (const a of ['127.0.0.1', '10.0.0.1', '172.16.0.1', '192.168.255.255', '169.254.0.1', '100.64.0.1', '0.0.0.0', '::1', '::', 'fd12::1', 'fe80::1', '::ffff:192.168.1.1']) {
      expect(isPrivateAddress(a), a).toBe(true);
    }
    for (const a of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:8.8.8.8', 'example.com']) {
      expect(isPrivateAddress(a), a).toBe(false);
    }
  });

  it('the lookup guard refuses a name that resolves to a private address, and passes a public address through', async () => {
    const err = await new Promise<Error | null>((resolve) => guardedLookup('localhost', {}, (e) => resolve(e)));
    expect(err).toBeInstanceOf(PrivateAddressError);
    expect(err!.message).toMatch(/localhost resolves to .*private or loopback/);
    // An IP literal resolves to itself (no DNS): each form of the callback.
    const one = await new Promise<[string | unknown, number | undefined]>((resolve) => guardedLookup('8.8.8.8', {}, (e, address, family) => resolve([address, family])));
    expect(one).toEqual(['8.8.8.8', 4]);
    const all = await new Promise<unknown>((resolve) => guardedLookup('8.8.8.8', { all: true }, (e, addresses) => resolve(addresses)));
    expect(all).toEqual([{ address: '8.8.8.8', family: 4 }]);
  });
});

describe('SVC_ALLOW_INSECURE_WEBHOOK_URLS and auth.webhooks.retrySchedule', () => {
  const env = (extra: Record<string, string>) => ({ SVC_APP_PATH: '/nonexistent-app-root', ...extra });

  it('1 or true allows (with a start-up warning), 0, false or unset refuses, anything else stops start-up', async () => {
    for (const value of ['1', 'true', ' TRUE ']) {
      const { config, warnings } = await loadConfig(env({ SVC_ALLOW_INSECURE_WEBHOOK_URLS: value }), { raw: {} });
      expect(config.env.allowInsecureWebhookUrls, value).toBe(true);
      expect(warnings.some((w) => w.startsWith('SVC_ALLOW_INSECURE_WEBHOOK_URLS=1'))).toBe(true);
    }
    for (const value of ['0', 'false', '']) {
      const { config, warnings } = await loadConfig(env({ SVC_ALLOW_INSECURE_WEBHOOK_URLS: value }), { raw: {} });
      expect(config.env.allowInsecureWebhookUrls, value).toBe(false);
      expect(warnings.some((w) => w.includes('WEBHOOK'))).toBe(false);
    }
    await expect(loadConfig(env({ SVC_ALLOW_INSECURE_WEBHOOK_URLS: 'yes' }), { raw: {} })).rejects.toThrow(/SVC_ALLOW_INSECURE_WEBHOOK_URLS must be 1/);
  });

  it('the retry schedule: seconds >= 0, default [5,30,120,600,3600,21600,86400]', async () => {
    expect((await loadConfig(env({}), { raw: {} })).config.auth.webhooks.retrySchedule).toEqual([5, 30, 120, 600, 3600, 21600, 86400]);
    expect((await loadConfig(env({}), { raw: { auth: { webhooks: { retrySchedule: [] } } } })).config.auth.webhooks.retrySchedule).toEqual([]);
    await expect(loadConfig(env({}), { raw: { auth: { webhooks: { retrySchedule: [-1] } } } })).rejects.toThrow(/retrySchedule/);
  });
});

describe('one attempt (sendWebhook)', () => {
  let server: Server;
  let base: string;
  const seen: { url: string; headers: Record<string, string>; body: string }[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ url: req.url!, headers: req.headers as Record<string, string>, body: Buffer.concat(chunks).toString() });
        if (req.url === '/ok') return void res.writeHead(204).end();
        if (req.url === '/redirect') return void res.writeHead(307, { location: '/ok' }).end();
        if (req.url === '/hang') return; // never answers
        if (req.url === '/reset') return void req.socket.destroy();
        if (req.url === '/head-then-reset') {
          res.writeHead(200, { 'content-length': '100000' });
          res.write('partial');
          setTimeout(() => req.socket.destroy(), 20);
          return;
        }
        if (req.url === '/endless') {
          // A body that never ends: the attempt stops reading after a few KB.
          res.writeHead(200);
          const piece = Buffer.alloc(16 * 1024, 'y');
          const timer = setInterval(() => res.write(piece), 1);
          res.on('close', () => clearInterval(timer));
          return;
        }
        res.writeHead(500).end('no');
      });
    });
    const port = await freePort();
    await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const attempt = (path: string, extra: Partial<Parameters<typeof sendWebhook>[0]> = {}) =>
    sendWebhook({ url: `${base}${path}`, secret: SECRET, id: 'evt-1', body: '{"type":"webhook.test"}', allowInsecure: true, timeoutMs: 2000, ...extra });

  it('a 2xx delivers; the request is a signed Standard Webhooks POST that standardwebhooks verifies', async () => {
    expect(await attempt('/ok')).toEqual({ delivered: true, statusCode: 204 });
    const got = seen.find((s) => s.url === '/ok')!;
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['webhook-id']).toBe('evt-1');
    expect(new Webhook(SECRET).verify(got.body, got.headers)).toEqual({ type: 'webhook.test' });
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 8).toString('base64')}`).verify(got.body, got.headers)).toThrow();
  });

  it('signedHeaders: v1,<base64 HMAC-SHA256 of id.timestamp.body> and Unix seconds', () => {
    const at = new Date('2030-01-02T03:04:05.678Z');
    const headers = signedHeaders(SECRET, 'msg_1', '{}', at);
    expect(headers['webhook-timestamp']).toBe(String(Math.floor(at.getTime() / 1000)));
    expect(headers['webhook-signature']).toBe(new Webhook(SECRET).sign('msg_1', at, '{}'));
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
  });

  it('a redirect is a failed attempt and is not followed', async () => {
    const before = seen.filter((s) => s.url === '/ok').length;
    expect(await attempt('/redirect')).toMatchObject({ delivered: false, statusCode: 307, error: expect.stringContaining('redirects are not followed') });
    expect(seen.filter((s) => s.url === '/ok').length).toBe(before);
  });

  it('a 500, a refused connection, a reset before any answer: failed attempts, never a throw', async () => {
    expect(await attempt('/fail')).toMatchObject({ delivered: false, statusCode: 500 });
    expect(await attempt('/reset')).toMatchObject({ delivered: false, statusCode: null });
    const closed = await freePort();
    expect(await sendWebhook({ url: `http://127.0.0.1:${closed}/`, secret: SECRET, id: 'x', body: '{}', allowInsecure: true })).toMatchObject({ delivered: false, statusCode: null, error: expect.stringContaining('ECONNREFUSED') });
  });

  it('the status decides: a 200 whose body breaks off, or never ends, still delivers, and is not read to the end', async () => {
    expect(await attempt('/head-then-reset')).toEqual({ delivered: true, statusCode: 200 });
    const started = Date.now();
    expect(await attempt('/endless', { timeoutMs: 5000 })).toEqual({ delivered: true, statusCode: 200 });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('without the switch, a URL the rule refuses is not even connected to', async () => {
    const count = seen.length;
    expect(await attempt('/ok', { allowInsecure: false })).toMatchObject({ delivered: false, statusCode: null, error: expect.stringContaining('https') });
    expect(seen.length).toBe(count);
  });

  it('a receiver that never answers: the attempt ends at DELIVERY_TIMEOUT_MS (10 s)', async () => {
    expect(DELIVERY_TIMEOUT_MS).toBe(10_000);
    const started = Date.now();
    const result = await sendWebhook({ url: `${base}/hang`, secret: SECRET, id: 'evt-2', body: '{}', allowInsecure: true });
    const took = Date.now() - started;
    expect(result).toEqual({ delivered: false, statusCode: null, error: 'no answer within 10 s' });
    expect(took).toBeGreaterThanOrEqual(9_900);
    expect(took).toBeLessThan(30_000);
  }, 40_000);

  it('an abort (svc stopping) ends the attempt at once', async () => {
    const controller = new AbortController();
    const pending = attempt('/hang', { signal: controller.signal, timeoutMs: 10_000 });
    setTimeout(() => controller.abort(), 50);
    expect(await pending).toMatchObject({ delivered: false, statusCode: null, error: expect.stringContaining('stopping') });
  });
});
