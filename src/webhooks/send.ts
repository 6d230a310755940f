/**
 * One delivery attempt as the Standard Webhooks spec says: POST of the JSON body with `webhook-id`,
 * `webhook-timestamp` (Unix seconds, the attempt's) and `webhook-signature` (`v1,<base64 HMAC-SHA256>`,
 * made by the `standardwebhooks` package, which receivers use to verify it).
 *
 * Node's own http client, not fetch: it never follows a redirect, takes a `lookup` that refuses
 * private addresses at connect time (`guardedLookup`), and lets the attempt read only a few KB of the
 * answer. A 2xx status within the timeout delivers; anything else (3xx, 4xx, 5xx, no answer in time,
 * a refused or reset connection, an address the URL rule forbids) is a failed attempt, never an error
 * that escapes: the answer's body is never needed, so at most MAX_ANSWER_BYTES of it are read.
 */
import http from 'node:http';
import https from 'node:https';
import { Webhook } from 'standardwebhooks';
import { SVC_VERSION } from '../version.ts';
import { guardedLookup, webhookUrlProblem } from './url-rule.ts';

/** How long a receiver has to answer with its status (CONTRACT 13: a 2xx within 10 s delivers). */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** The most of an answer's body an attempt reads before it stops (a 10 MB answer is cut here). */
export const MAX_ANSWER_BYTES = 4096;

export interface AttemptRequest {
  url: string;
  /** `whsec_<base64>`. */
  secret: string;
  /** `webhook-id`: the event id, the same for every attempt. */
  id: string;
  body: string;
  /** SVC_ALLOW_INSECURE_WEBHOOK_URLS: plain http: and private addresses allowed. */
  allowInsecure: boolean;
  timeoutMs?: number;
  /** Ends the attempt early (shutdown): it then counts as not made. */
  signal?: AbortSignal;
}

export interface AttemptResult {
  delivered: boolean;
  /** The receiver's status, or null when none came (timeout, connection refused...). */
  statusCode: number | null;
  /** Why it failed, for the delivery record and the log (never the secret, never the body). */
  error?: string;
}

/**
 * Connections to receivers are kept between deliveries: a TCP (and TLS) handshake per delivery cost
 * more CPU than the rest of the delivery, on the instance whose requests caused the events. Only a
 * connection whose answer was read to its end goes back to the pool; the address rule is checked when
 * each connection is made (`guardedLookup`), so a kept one was checked too. Idle ones are unref'd by
 * Node and closed after AGENT_IDLE_MS: shorter than the idle timeout of common receivers (Node's
 * server closes after 5 s), so a kept connection is rarely one the receiver is closing.
 */
const AGENT_IDLE_MS = 4000;
/**
 * Per receiver origin: room for every attempt under way (16 jobs at once, an event's endpoints side by
 * side, often on one origin), so none waits for a socket against its timeout; and as many kept as may be
 * open: with fewer, each burst of events closed most of its connections at its end and opened them again
 * at the next, a TCP connect and close per delivery (seen in a CPU profile of two instances delivering
 * to one receiver).
 */
const MAX_SOCKETS = 64;
const agentOptions = { keepAlive: true, maxSockets: MAX_SOCKETS, maxFreeSockets: MAX_SOCKETS, timeout: AGENT_IDLE_MS, scheduling: 'lifo' as const };
const agents = { http: new http.Agent(agentOptions), https: new https.Agent(agentOptions) };

/** Signers by secret: the secret is decoded once, not per attempt. */
const signers = new Map<string, Webhook>();
function signerFor(secret: string): Webhook {
  let signer = signers.get(secret);
  if (!signer) {
    if (signers.size >= 1000) signers.clear();
    signer = new Webhook(secret);
    signers.set(secret, signer);
  }
  return signer;
}

/** The Standard Webhooks headers of one attempt, signed now. */
export function signedHeaders(secret: string, id: string, body: string, now = new Date()): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': `svc-webhooks/${SVC_VERSION}`,
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
    'webhook-signature': signerFor(secret).sign(id, now, body),
  };
}

/** Makes one attempt; never throws. */
export function sendWebhook(req: AttemptRequest): Promise<AttemptResult> {
  return new Promise((resolve) => {
    // The rule again at send time: the switch may have been removed since the URL was saved.
    const problem = webhookUrlProblem(req.url, req.allowInsecure);
    if (problem) return resolve({ delivered: false, statusCode: null, error: `the URL ${problem}` });
    if (req.signal?.aborted) return resolve({ delivered: false, statusCode: null, error: 'aborted: svc is stopping' });
    const url = new URL(req.url);
    const body = Buffer.from(req.body, 'utf8');
    const headers = { ...signedHeaders(req.secret, req.id, req.body), 'content-length': String(body.length) };
    const secure = url.protocol === 'https:';
    const client = secure ? https : http;
    let settled = false;
    // `ended`: the answer was read to its end, so its connection may serve the next delivery.
    const finish = (result: AttemptResult, ended = false) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
      if (!ended) request.destroy();
      resolve(result);
    };
    const request = client.request(url, {
      method: 'POST',
      headers,
      agent: secure ? agents.https : agents.http,
      ...(req.allowInsecure ? {} : { lookup: guardedLookup as unknown as typeof import('node:dns').lookup }),
    });
    const timeoutMs = req.timeoutMs ?? DELIVERY_TIMEOUT_MS;
    const timer = setTimeout(() => finish({ delivered: false, statusCode: null, error: `no answer within ${timeoutMs / 1000} s` }), timeoutMs);
    const onAbort = () => finish({ delivered: false, statusCode: null, error: 'aborted: svc is stopping' });
    req.signal?.addEventListener('abort', onAbort, { once: true });
    request.on('error', (err: NodeJS.ErrnoException) => finish({ delivered: false, statusCode: null, error: err.code ? `${err.code}: ${err.message}` : err.message }));
    request.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const delivered = status >= 200 && status < 300;
      const result: AttemptResult = { delivered, statusCode: status, ...(delivered ? {} : { error: status >= 300 && status < 400 ? `answered ${status} (redirects are not followed)` : `answered ${status}` }) };
      // The status decides; a little of the body is read so a short answer ends as it should, then it stops.
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > MAX_ANSWER_BYTES) finish(result);
      });
      res.on('end', () => finish(result, true));
      res.on('error', () => finish(result));
      res.on('close', () => finish(result));
    });
    request.end(body);
  });
}
