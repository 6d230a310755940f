// MongoDB for the test suites.
//
// MONGODB_TEST_URL set: that server is used as it is (a real MongoDB, as a user's CI would have).
// Otherwise mongo-java-server (an in-memory MongoDB wire-protocol server from Maven Central) is
// started through the small launcher in ./mongo-java-server/, built once with Maven into
// ./mongo-java-server/target/mongo-test-server.jar and rebuilt only when pom.xml or a file under
// src/ is newer than that jar. Each call starts its own server on a free port, with empty data. The
// launcher warms its JVM up (a few rounds of a driver's requests on a throwaway server) before it
// listens, so a server that listens answers at speed, as a real mongod does.
//
// When no server can be had (no java or mvn, a failed build, a server that does not start), the
// reason goes to stderr and null is returned: the caller decides whether to skip or to fail.
// startPrivateMongoServer(port) always starts a mongo-java-server of its own (never the external
// one), optionally on a given port, so a test can stop it and start a new one on the same port.
// MONGO_TEST_SERVER_VERBOSE=1 forwards the server's own stderr (warnings and errors only).

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface MongoTestServer {
  url: string;
  kind: 'external' | 'mongo-java-server';
  /** The server process (mongo-java-server only), e.g. to freeze it with SIGSTOP. */
  pid?: number;
  stop(): Promise<void>;
}

const PROJECT_DIR = fileURLToPath(new URL('./mongo-java-server/', import.meta.url));
const TARGET_DIR = path.join(PROJECT_DIR, 'target');
const JAR = path.join(TARGET_DIR, 'mongo-test-server.jar');
const LOCK_DIR = path.join(TARGET_DIR, '.build-lock');
const DATABASE = 'svc_test';

const BUILD_TIMEOUT_MS = 5 * 60_000;
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 5_000;
const TAIL_LINES = 40;

class Unavailable extends Error {}

export async function startMongoTestServer(): Promise<MongoTestServer | null> {
  const external = process.env.MONGODB_TEST_URL;
  if (external) {
    return { url: external, kind: 'external', stop: async () => {} };
  }
  try {
    await ensureJar();
    return await launch();
  } catch (error) {
    const reason = error instanceof Unavailable ? error.message : String((error as Error)?.stack ?? error);
    process.stderr.write(`mongo test server unavailable: ${reason}\n`);
    return null;
  }
}

/**
 * A mongo-java-server of the caller's own (MONGODB_TEST_URL is not used), on `port` (0: any free
 * port). For outage tests: stop it, then start another on the same port. The port may be briefly
 * busy right after a stop, so binding is retried for up to `bindRetryMs`. Null when unavailable.
 */
export async function startPrivateMongoServer(port = 0, bindRetryMs = 5_000): Promise<MongoTestServer | null> {
  try {
    await ensureJar();
  } catch (error) {
    const reason = error instanceof Unavailable ? error.message : String((error as Error)?.stack ?? error);
    process.stderr.write(`mongo test server unavailable: ${reason}\n`);
    return null;
  }
  const deadline = Date.now() + bindRetryMs;
  for (;;) {
    try {
      return await launch(port);
    } catch (error) {
      if (port === 0 || Date.now() > deadline) {
        const reason = error instanceof Unavailable ? error.message : String((error as Error)?.stack ?? error);
        process.stderr.write(`mongo test server unavailable on port ${port}: ${reason}\n`);
        return null;
      }
      await sleep(200);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Build (once per process; across processes serialised by a lock directory under target/)

let jarReady: Promise<void> | undefined;

function ensureJar(): Promise<void> {
  jarReady ??= buildIfStale().catch((error: unknown) => {
    jarReady = undefined; // let a later call try again
    throw error;
  });
  return jarReady;
}

async function buildIfStale(): Promise<void> {
  // Fast path, no lock: the jar is written in place by the shade plugin, so only trust a jar
  // seen as fresh while no build is running.
  if (jarIsFresh() && !fs.existsSync(LOCK_DIR)) return;
  const release = await acquireLock();
  try {
    if (jarIsFresh()) return;
    await runMaven();
    if (!fs.existsSync(JAR)) {
      throw new Unavailable(`mvn package succeeded but ${JAR} was not produced`);
    }
  } finally {
    release();
  }
}

function jarIsFresh(): boolean {
  let jarTime: number;
  try {
    jarTime = fs.statSync(JAR).mtimeMs;
  } catch {
    return false;
  }
  return newestSourceTime() < jarTime;
}

function newestSourceTime(): number {
  let newest = fs.statSync(path.join(PROJECT_DIR, 'pom.xml')).mtimeMs;
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else newest = Math.max(newest, fs.statSync(full).mtimeMs);
    }
  };
  walk(path.join(PROJECT_DIR, 'src'));
  return newest;
}

async function acquireLock(): Promise<() => void> {
  fs.mkdirSync(TARGET_DIR, { recursive: true });
  const deadline = Date.now() + BUILD_TIMEOUT_MS + 30_000;
  for (;;) {
    try {
      fs.mkdirSync(LOCK_DIR);
      fs.writeFileSync(path.join(LOCK_DIR, 'pid'), String(process.pid));
      return () => fs.rmSync(LOCK_DIR, { recursive: true, force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (lockIsStale()) {
      fs.rmSync(LOCK_DIR, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new Unavailable(`timed out waiting for another build of the test server (lock ${LOCK_DIR})`);
    }
    await sleep(250);
  }
}

function lockIsStale(): boolean {
  try {
    const pid = Number(fs.readFileSync(path.join(LOCK_DIR, 'pid'), 'utf8'));
    if (Number.isInteger(pid) && pid > 0) {
      try {
        process.kill(pid, 0);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ESRCH') return true; // owner is gone
      }
    }
    return Date.now() - fs.statSync(LOCK_DIR).mtimeMs > BUILD_TIMEOUT_MS + 60_000;
  } catch {
    // No pid file yet (the owner is between mkdir and write) or the lock just went away.
    try {
      return Date.now() - fs.statSync(LOCK_DIR).mtimeMs > 10_000;
    } catch {
      return false;
    }
  }
}

function runMaven(): Promise<void> {
  return new Promise((resolve, reject) => {
    const args = ['-q', '-B', '-Dstyle.color=never', 'package', '-DskipTests'];
    const output = new Tail();
    let child: ChildProcess;
    try {
      // Own process group, so that a timeout can kill mvn's JVM along with its wrapper script.
      child = spawn('mvn', args, { cwd: PROJECT_DIR, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      reject(new Unavailable(`cannot run mvn: ${(error as Error).message}`));
      return;
    }
    child.stdout?.on('data', (chunk: Buffer) => output.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk));

    let settled = false;
    const settle = (error?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (error) reject(error);
      else resolve();
    };
    const timer = setTimeout(() => {
      killGroup(child);
      settle(
        new Unavailable(
          `mvn ${args.join(' ')} timed out after ${BUILD_TIMEOUT_MS / 1000} s in ${PROJECT_DIR}` +
            output.describe('mvn output'),
        ),
      );
    }, BUILD_TIMEOUT_MS);

    child.on('error', (error: NodeJS.ErrnoException) => {
      const what = error.code === 'ENOENT' ? 'mvn not found on PATH (install Maven)' : `cannot run mvn: ${error.message}`;
      settle(new Unavailable(what));
    });
    child.on('close', (code, signal) => {
      if (code === 0) settle();
      else
        settle(
          new Unavailable(
            `mvn ${args.join(' ')} failed (${signal ? `signal ${signal}` : `exit code ${code}`}) in ${PROJECT_DIR}` +
              output.describe('mvn output'),
          ),
        );
    });
  });
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}

// ---------------------------------------------------------------------------------------------
// Server

const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;

function trackChild(child: ChildProcess): void {
  liveChildren.add(child);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const live of liveChildren) live.kill('SIGKILL');
  });
}

function launch(port = 0): Promise<MongoTestServer> {
  return new Promise((resolve, reject) => {
    // A test server shares the machine with svc and the suite: C1 only and the serial collector, so
    // its JIT and GC threads do not take both cores (measured on a busy 2-core machine: CPU to
    // LISTENING 1.9 -> 1.4 s, CPU for 400 operations 1.1 -> 0.7 s, same wall time).
    const args = ['-Xmx512m', '-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', '-jar', JAR, String(port)];
    const stderrTail = new Tail();
    const verbose = Boolean(process.env.MONGO_TEST_SERVER_VERBOSE);
    const child = spawn('java', args, { stdio: ['pipe', 'pipe', 'pipe'] });

    // Whatever happens to this process, the server goes with it: killed on a normal exit here,
    // and on its own when its stdin closes (this process killed by a signal).
    trackChild(child);

    let settled = false;
    let exited = false;
    let stdoutBuffer = '';
    const exitedPromise = new Promise<void>((done) => child.once('exit', () => done()));
    child.once('exit', () => {
      exited = true;
      liveChildren.delete(child);
    });
    child.stdin.on('error', () => {}); // EPIPE once the server has gone

    child.stderr.on('data', (chunk: Buffer) => {
      stderrTail.push(chunk);
      if (verbose) process.stderr.write(prefixLines(chunk.toString('utf8'), '[mongo-java-server] '));
    });

    const fail = (message: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Unavailable(message + stderrTail.describe('java stderr')));
    };

    const timer = setTimeout(() => {
      fail(`java ${args.join(' ')} printed no LISTENING line within ${START_TIMEOUT_MS / 1000} s`);
    }, START_TIMEOUT_MS);

    child.stdout.on('data', (chunk: Buffer) => {
      if (settled) return; // keep draining
      stdoutBuffer += chunk.toString('utf8');
      const match = /^LISTENING (\d+)\r?$/m.exec(stdoutBuffer);
      if (!match) return;
      settled = true;
      clearTimeout(timer);
      const port = Number(match[1]);

      // A forgotten stop() must not keep this process alive; the exit hook above still kills it.
      child.unref();
      for (const stream of [child.stdin, child.stdout, child.stderr]) {
        (stream as unknown as { unref?: () => void }).unref?.();
      }

      let stopping: Promise<void> | undefined;
      resolve({
        url: `mongodb://127.0.0.1:${port}/${DATABASE}`,
        kind: 'mongo-java-server',
        pid: child.pid,
        stop: () => {
          stopping ??= (async () => {
            if (exited) return;
            child.kill('SIGCONT'); // a frozen server would not handle SIGTERM
            child.stdin.end();
            child.kill('SIGTERM');
            let timeout: NodeJS.Timeout | undefined;
            const timedOut = new Promise<boolean>((done) => {
              timeout = setTimeout(() => done(true), STOP_TIMEOUT_MS);
            });
            const tooSlow = await Promise.race([exitedPromise.then(() => false), timedOut]);
            clearTimeout(timeout);
            if (tooSlow && !exited) {
              child.kill('SIGKILL');
              await exitedPromise;
            }
          })();
          return stopping;
        },
      });
    });

    child.on('error', (error: NodeJS.ErrnoException) => {
      fail(error.code === 'ENOENT' ? 'java not found on PATH (install a JDK, 17 or newer)' : `cannot run java: ${error.message}`);
    });
    child.on('exit', (code, signal) => {
      fail(`java ${args.join(' ')} exited (${signal ? `signal ${signal}` : `exit code ${code}`}) before printing LISTENING`);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Helpers

const ANSI_COLOUR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

/** The last lines of a stream, for error reports. */
class Tail {
  private text = '';

  push(chunk: Buffer): void {
    this.text += chunk.toString('utf8');
    if (this.text.length > 64_000) this.text = this.text.slice(-32_000);
  }

  describe(label: string): string {
    const lines = this.text.replace(ANSI_COLOUR, '').trimEnd().split(/\r?\n/).slice(-TAIL_LINES);
    if (lines.length === 0 || (lines.length === 1 && lines[0] === '')) return ` (no ${label})`;
    return `\n--- last lines of ${label} ---\n${lines.join('\n')}\n---`;
  }
}

function prefixLines(text: string, prefix: string): string {
  return text.replace(/^(?=.)/gm, prefix);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
