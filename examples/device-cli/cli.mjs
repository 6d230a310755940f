#!/usr/bin/env node
// A tiny command-line tool that signs in to svc with the device login (RFC 8628, docs/api-keys.md) and
// then calls the todo plugin with the API key it got. Node 20, no dependencies.
//
//   node examples/device-cli/cli.mjs [--url http://localhost:3000] [--name my-cli] [todo text to add]
//
// It asks for a device code, prints the page and the code for you to approve while signed in there,
// polls as RFC 8628 says (every `interval` seconds, 5 s more after each `slow_down`), and with the key
// lists your todos, adding one first when you give its text. The key is printed by its prefix only.

import console from 'node:console';
import { hostname } from 'node:os';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';

const { fetch } = globalThis;

/**
 * The whole flow. `log` prints a line; `wait` sleeps (ms). Returns the todos listed. Throws an Error
 * whose message says what went wrong (the login denied or expired, svc's error code).
 */
export async function run({ baseUrl, name = `device-cli on ${hostname()}`, add, log = console.log, wait = sleep }) {
  const base = baseUrl.replace(/\/+$/, '');
  const post = (path, body) => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  const started = await post('/auth/device/code', { name, scopes: ['svc__todo:read', 'svc__todo:write'] });
  if (!started.ok) throw new Error(`svc refused the device login: ${await errorOf(started)}`);
  const code = await started.json();
  log(`To sign in, open ${code.verification_uri_complete}`);
  log(`(or ${code.verification_uri} and enter the code ${code.user_code})`);

  let interval = code.interval;
  const deadline = Date.now() + code.expires_in * 1000;
  let key;
  for (let first = true; !key; first = false) {
    if (Date.now() > deadline) throw new Error('The code expired before it was approved: run me again');
    if (!first) await wait(interval * 1000);
    const res = await post('/auth/device/token', { grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: code.device_code });
    const body = await res.json().catch(() => ({}));
    if (res.ok) {
      key = body.access_token;
      break;
    }
    if (body.error === 'authorization_pending') continue;
    if (body.error === 'slow_down') {
      interval += 5;
      continue;
    }
    if (body.error === 'access_denied') throw new Error('The sign-in was denied');
    if (body.error === 'expired_token') throw new Error('The code expired before it was approved: run me again');
    throw new Error(`svc refused the device login: ${typeof body.error === 'string' ? body.error : (body.error?.code ?? res.status)}`);
  }
  log(`Signed in: API key ${key.slice(0, 12)}… (scopes svc__todo:read svc__todo:write)`);

  const auth = { authorization: `Bearer ${key}` };
  if (add) {
    const made = await fetch(`${base}/svc__todo/todo`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ name: add }) });
    if (!made.ok) throw new Error(`Adding the todo failed: ${await errorOf(made)}`);
    log(`Added: ${add}`);
  }
  const listed = await fetch(`${base}/svc__todo/all`, { headers: auth });
  if (!listed.ok) throw new Error(`Listing the todos failed: ${await errorOf(listed)}`);
  const { data } = await listed.json();
  log(`Your todos (${data.length}):`);
  for (const todo of data) log(`- ${todo.name}`);
  return data;
}

/** svc's error code and message (CONTRACT section 2), or the status. */
async function errorOf(res) {
  const body = await res.json().catch(() => null);
  return body?.error?.code ? `${body.error.code}: ${body.error.message}` : `HTTP ${res.status}`;
}

const USAGE = `Usage: node examples/device-cli/cli.mjs [--url http://localhost:3000] [--name my-cli] [todo text to add]
Signs in to svc with the device login, then lists your todos (adding one first when given its text).
--url defaults to $SVC_URL, else http://localhost:3000. After "--", everything is the todo's text.`;

/** The options, `{ help: true }` for --help, or an Error for an option it does not know (never sent as a todo). */
function parseArgs(argv) {
  const opts = { baseUrl: process.env.SVC_URL ?? 'http://localhost:3000' };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--') {
      rest.push(...argv.slice(i + 1));
      break;
    } else if (argv[i] === '--help' || argv[i] === '-h') return { help: true };
    else if (argv[i] === '--url' || argv[i] === '--name') {
      if (argv[i + 1] === undefined) throw new Error(`${argv[i]} needs a value\n${USAGE}`);
      opts[argv[i] === '--url' ? 'baseUrl' : 'name'] = argv[++i];
    } else if (argv[i].startsWith('-')) throw new Error(`Unknown option ${argv[i]}\n${USAGE}`);
    else rest.push(argv[i]);
  }
  if (rest.length) opts.add = rest.join(' ');
  return opts;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  Promise.resolve()
    .then(() => parseArgs(process.argv.slice(2)))
    .then((opts) => (opts.help ? console.log(USAGE) : run(opts)))
    .catch((err) => {
      console.error(err.message);
      process.exitCode = 1;
    });
}
