/**
 * Resource limits of a script's process (issue 52): set by util-linux `prlimit`, which sets them and
 * then becomes the program (exec: same pid, same process group), since Node cannot `setrlimit` a child.
 * What a limit does when reached: `cpuSeconds` (RLIMIT_CPU) ends the program with SIGXCPU (SIGKILL a
 * second later if it ignores that);
 * `memoryBytes` (RLIMIT_DATA: its heap and private mappings, not the address space, which V8 reserves
 * by gigabytes; Node 24's code range still counts ~512 MiB) makes its allocations fail; `processes` (RLIMIT_NPROC) makes its forks fail once the
 * service's user has that many processes (the kernel does not apply it to root).
 */
import { accessSync, constants, existsSync } from 'node:fs';
import path from 'node:path';

/** Another user for a script's process: a script of svc's own user can read svc's files and environment (`/proc/<pid>/environ`). */
export interface RunAs {
  uid: number;
  gid: number;
}

/** Throws naming what is wrong with `runAs`. */
export function checkRunAs(where: string, runAs: unknown): asserts runAs is RunAs {
  const { uid, gid, ...rest } = (typeof runAs === 'object' && runAs !== null ? runAs : {}) as Record<string, unknown>;
  if (Object.keys(rest).length || ![uid, gid].every((id) => Number.isSafeInteger(id) && (id as number) >= 0)) {
    throw new Error(`${where}: runAs must be { uid, gid }, each a user or group id (a non-negative integer)`);
  }
}

export interface ResourceLimits {
  cpuSeconds?: number;
  memoryBytes?: number;
  processes?: number;
}

const FLAGS: Record<keyof ResourceLimits, string> = { cpuSeconds: '--cpu', memoryBytes: '--data', processes: '--nproc' };
export const LIMIT_KEYS = Object.keys(FLAGS) as (keyof ResourceLimits)[];

/** util-linux `prlimit`, where the OS has it. */
export const PRLIMIT = ['/usr/bin/prlimit', '/bin/prlimit'].find((p) => existsSync(p));

/** Throws naming what is wrong with `limits` (each a positive integer), or that this OS cannot set them. */
export function checkLimits(where: string, limits: unknown): asserts limits is ResourceLimits {
  if (typeof limits !== 'object' || limits === null) throw new Error(`${where}: limits must be an object`);
  for (const [key, value] of Object.entries(limits)) {
    if (!(LIMIT_KEYS as string[]).includes(key)) throw new Error(`${where}: limits.${key} is not one of ${LIMIT_KEYS.join(', ')}`);
    if (!Number.isSafeInteger(value) || (value as number) < 1) throw new Error(`${where}: limits.${key} must be a positive integer`);
  }
  if (Object.keys(limits).length && !PRLIMIT) throw new Error(`${where}: resource limits need util-linux prlimit, which this system lacks`);
}

/**
 * The program and arguments to spawn so that `exe` runs under `limits`. Throws ENOENT-like when the
 * program cannot be found: prlimit would report that only as exit 127, not as a failure to start.
 */
export function limited(exe: string, argv: string[], limits: ResourceLimits, envPath: string | undefined, cwd: string | undefined): [string, string[]] {
  // CPU: SIGXCPU at the limit (the status names the cause), the kernel's SIGKILL a second later for a program that ignores it.
  const flags = LIMIT_KEYS.filter((k) => limits[k] !== undefined).map((k) => `${FLAGS[k]}=${k === 'cpuSeconds' ? `${limits[k]}:${limits[k]! + 1}` : limits[k]}`);
  if (!flags.length || !PRLIMIT) return [exe, argv];
  const candidates = exe.includes('/') ? [path.resolve(cwd ?? process.cwd(), exe)] : (envPath ?? '').split(':').filter(Boolean).map((dir) => path.join(dir, exe));
  const found = candidates.find((file) => {
    try {
      accessSync(file, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  if (!found) throw Object.assign(new Error(`spawn ${exe} ENOENT`), { code: 'ENOENT' });
  return [PRLIMIT, [...flags, '--', found, ...argv]];
}
