import { statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import * as v from 'valibot';
import { hasCharacters, MIN_PASSWORD_LENGTH } from './auth/passwords.ts';
import { AuditLog } from './audit/log.ts';
import { UserService } from './auth/users.ts';
import { BreachedPasswords } from './auth/breached-passwords.ts';
import type { AppError } from './http/errors.ts';
import { loadConfig, loadDotEnv } from './config/load.ts';
import { openDatabase } from './db/index.ts';
import { DataVersionError, migrate, MIGRATIONS } from './db/migrations.ts';
import { emailSchema } from './http/schemas.ts';
import { doctor } from './doctor.ts';
import { doctorUrl } from './doctor-url.ts';
import { SVC_VERSION } from './version.ts';
import { createLogger } from './logger.ts';

const USAGE = `Usage:
  svc doctor [--with <other app root>]
      Checks the app (SVC_APP_PATH, else the working directory) and its environment against the
      0.1.x -> 0.2.x migration steps and production needs; exit code 1 when a check fails.
  svc doctor --url <public base URL of the API>
      Asks a running svc, through the proxies in front of it, what it sees and what is wrong with the
      deployment (cookies, proxies, origins); an admin's API key with auth:admin in SVC_API_KEY.
      Exit code 1 when it names a finding.
  svc migrate
      Brings the database (MONGODB_URL, else the embedded one) to this svc's data version, as a start
      would: a deploy step before new instances start. Refuses data newer than this svc.
  svc user create --email <email> [--admin] [--firstname <name>] [--lastname <name>]
      The password is read from standard input (piped), or asked for at a prompt.
      It is never taken as an argument: arguments end up in shell history and process lists.`;

/** Reads the password: all of piped stdin, or a prompt that does not echo. */
async function readPassword(): Promise<string> {
  const stdin = process.stdin;
  if (!stdin.isTTY) {
    let data = '';
    for await (const chunk of stdin) data += chunk;
    return data.replace(/\r?\n$/, '');
  }
  process.stderr.write('Password: ');
  stdin.setRawMode(true);
  stdin.setEncoding('utf8');
  return new Promise((resolve, reject) => {
    let password = '';
    const onData = (key: string) => {
      for (const ch of key) {
        if (ch === '\r' || ch === '\n') {
          stdin.setRawMode(false);
          stdin.off('data', onData);
          stdin.pause();
          process.stderr.write('\n');
          resolve(password);
          return;
        }
        if (ch === '\u0003') {
          stdin.setRawMode(false);
          reject(new Error('cancelled'));
          return;
        }
        if (ch === '\u007f') password = password.slice(0, -1);
        else password += ch;
      }
    };
    stdin.on('data', onData);
  });
}

async function createUser(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { email: { type: 'string' }, admin: { type: 'boolean', default: false }, firstname: { type: 'string' }, lastname: { type: 'string' }, password: { type: 'string' } },
    strict: true,
  });
  if (values.password !== undefined) {
    process.stderr.write('--password is refused: pass the password on standard input or at the prompt\n');
    return 2;
  }
  const email = v.safeParse(emailSchema, values.email);
  if (!email.success) {
    process.stderr.write(`--email ${values.email === undefined ? 'is required' : 'must be an email address'}\n${USAGE}\n`);
    return 2;
  }
  const password = await readPassword();
  if (!hasCharacters(password, MIN_PASSWORD_LENGTH)) {
    process.stderr.write(`the password must be at least ${MIN_PASSWORD_LENGTH} characters\n`);
    return 2;
  }
  const { config } = await loadConfig(process.env, { sendsMail: false });
  const logger = createLogger('warn');
  try {
    await new BreachedPasswords(config.auth.passwords.breachCheck, logger).check(password);
  } catch (err) {
    const e = err as AppError;
    if (e.code !== 'password_compromised' && e.code !== 'breach_check_unavailable') throw err;
    process.stderr.write(`${e.code}: ${e.message}\n`);
    return e.code === 'password_compromised' ? 2 : 1;
  }
  const db = await openDatabase(config, logger);
  try {
    const users = await UserService.open(db);
    const user = await users.create({ email: email.output, password, isAdmin: values.admin, firstname: values.firstname, lastname: values.lastname, createdVia: 'cli' });
    const audit = await AuditLog.open(db, config, logger, { sweep: false });
    await audit.record(null, { type: 'user.created', actor: { type: 'system' }, subject: { userId: user._id, email: user.email }, details: { via: 'cli', ...(values.admin ? { isAdmin: true } : {}) } });
    process.stdout.write(`created user ${user.email} (id ${user._id})${values.admin ? ' with the ADMIN tag' : ''}\n`);
    return 0;
  } finally {
    await db.close();
  }
}

/** `svc doctor [--with <other app root>]`: a typo or a folder that is not there is refused (exit 2), never skipped. */
async function runDoctor(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { with: { type: 'string' }, url: { type: 'string' }, help: { type: 'boolean', short: 'h' } }, strict: true });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (values.url !== undefined) return doctorUrl(values.url);
  if (values.with !== undefined && !statSync(values.with, { throwIfNoEntry: false })?.isDirectory()) {
    process.stderr.write(`--with ${values.with}: no such folder (the app root of the other app)\n`);
    return 2;
  }
  return doctor(values.with);
}

/** `svc migrate`: the pending data migrations, run and listed; exit 1 for data newer than this svc. */
async function runMigrate(args: string[]): Promise<number> {
  parseArgs({ args, options: {}, strict: true });
  const { config } = await loadConfig(process.env, { sendsMail: false });
  const db = await openDatabase(config, createLogger('warn'));
  try {
    const ran = await migrate(db, createLogger('warn'));
    for (const m of ran) process.stdout.write(`migrated to data version ${m.version}: ${m.name}\n`);
    process.stdout.write(`data version ${MIGRATIONS.at(-1)!.version} (svc ${SVC_VERSION})${ran.length ? '' : ': nothing to do'}\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof DataVersionError)) throw err;
    process.stderr.write(`svc migrate: ${err.message}\n`);
    return 1;
  } finally {
    await db.close();
  }
}

/** `svc <command>`: returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [group, command, ...rest] = argv;
  try {
    loadDotEnv(); // the same environment as the service's
    if (group === 'user' && command === 'create') return await createUser(rest);
    if (group === 'doctor') return await runDoctor(argv.slice(1));
    if (group === 'migrate') return await runMigrate(argv.slice(1));
    process.stderr.write(`${USAGE}\n`);
    return group === undefined || group === '--help' ? 0 : 2;
  } catch (err) {
    // parseArgs' refusals (an unknown option, a missing value) are usage errors.
    const usage = (err as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS');
    process.stderr.write(`svc: ${(err as Error).message}\n${usage ? `${USAGE}\n` : ''}`);
    return usage ? 2 : 1;
  }
}
