// Real Redis topologies for the scale-out suites, from Debian's redis-server, loopback only, in temp
// folders, on fixed ports below the ephemeral range (so nothing else grabs them between runs):
//   a Cluster of 3 masters + 3 replicas on 7101-7106 (`redis-cli --cluster create`), and
//   a primary (7201) + replica (7202) watched by 3 Sentinels (27101-27103), master name `svcmaster`.
// Every process is killed when the suite ends (and on the test process's exit, whatever happened).

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { sleep, tempDir } from '../../support/spawn.ts';

const live = new Map<number, ChildProcess>();
process.once('exit', () => {
  for (const child of live.values()) child.kill('SIGKILL');
});

export const CLUSTER_PORTS = [7101, 7102, 7103, 7104, 7105, 7106];
export const SENTINEL_DATA_PORTS = [7201, 7202];
export const SENTINEL_PORTS = [27101, 27102, 27103];
export const MASTER_NAME = 'svcmaster';

function start(port: number, args: string[]): void {
  const child = spawn('redis-server', args, { stdio: 'ignore' });
  live.set(port, child);
  child.once('exit', () => live.get(port) === child && live.delete(port));
}

/** A command on a fresh connection to one port. */
export async function ask(port: number, ...args: string[]): Promise<unknown> {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 });
  client.on('error', () => {});
  try {
    await client.connect();
    return await client.call(args[0]!, ...args.slice(1));
  } finally {
    client.disconnect();
  }
}

/** Polls until `check` holds, at most `timeoutMs` (a busy machine is slow, never stuck). */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(100);
  }
}

const listening = (port: number) => until(`redis-server on ${port}`, async () => (await ask(port, 'PING')) === 'PONG', 15_000);

export async function kill(port: number): Promise<void> {
  const child = live.get(port);
  if (!child) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

export async function stopAll(): Promise<void> {
  await Promise.all([...live.keys()].map(kill));
}

/** Kills leftovers of an earlier run on these ports (a crashed test process). */
async function clearPorts(ports: number[]): Promise<void> {
  for (const port of ports) {
    try {
      await ask(port, 'SHUTDOWN', 'NOSAVE');
    } catch {
      // nothing there
    }
  }
}

export interface ClusterTopology {
  url: string;
  /** The master port that serves this key's slot now. */
  masterOf(key: string): Promise<number>;
}

export async function startCluster(): Promise<ClusterTopology> {
  await clearPorts(CLUSTER_PORTS);
  const dir = tempDir('svc-cluster-');
  for (const port of CLUSTER_PORTS) {
    const data = path.join(dir, String(port));
    mkdirSync(data);
    start(port, ['--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000', '--save', '', '--appendonly', 'no', '--dir', data]);
  }
  await Promise.all(CLUSTER_PORTS.map(listening));
  const create = spawnSync('redis-cli', ['--cluster', 'create', ...CLUSTER_PORTS.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'], { encoding: 'utf8', timeout: 60_000 });
  if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
  await until('cluster_state:ok on every node', async () => {
    const infos = await Promise.all(CLUSTER_PORTS.map((p) => ask(p, 'CLUSTER', 'INFO')));
    return infos.every((i) => String(i).includes('cluster_state:ok'));
  });
  return {
    url: `redis+cluster://127.0.0.1:${CLUSTER_PORTS[0]},127.0.0.1:${CLUSTER_PORTS[1]}`,
    async masterOf(key) {
      const alive = CLUSTER_PORTS.filter((p) => live.has(p));
      const slot = Number(await ask(alive[0]!, 'CLUSTER', 'KEYSLOT', key));
      const slots = (await ask(alive[0]!, 'CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
      const owner = slots.find(([from, to]) => slot >= from && slot <= to);
      if (!owner) throw new Error(`no master serves slot ${slot}`);
      return Number(owner[2][1]);
    },
  };
}

export interface SentinelTopology {
  url: string;
  /** The port of the current master, as the Sentinels report it. */
  master(): Promise<number>;
}

export async function startSentinel(): Promise<SentinelTopology> {
  await clearPorts([...SENTINEL_DATA_PORTS, ...SENTINEL_PORTS]);
  const dir = tempDir('svc-sentinel-');
  const [primary, replica] = SENTINEL_DATA_PORTS as [number, number];
  start(primary, ['--port', String(primary), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir]);
  start(replica, ['--port', String(replica), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--replicaof', '127.0.0.1', String(primary)]);
  await Promise.all(SENTINEL_DATA_PORTS.map(listening));
  await until('the replica in sync', async () => String(await ask(replica, 'INFO', 'replication')).includes('master_link_status:up'));
  for (const port of SENTINEL_PORTS) {
    // Sentinel rewrites its config file: one writable file each.
    const conf = path.join(dir, `sentinel-${port}.conf`);
    writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${primary} 2`,
        `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
        `sentinel failover-timeout ${MASTER_NAME} 5000`,
        `sentinel parallel-syncs ${MASTER_NAME} 1`,
        '',
      ].join('\n'),
    );
    start(port, [conf, '--sentinel']);
  }
  await Promise.all(SENTINEL_PORTS.map(listening));
  const master = async () => Number(((await ask(SENTINEL_PORTS[0]!, 'SENTINEL', 'get-master-addr-by-name', MASTER_NAME)) as [string, string])[1]);
  await until('the Sentinels know the master and each other', async () => {
    const info = String(await ask(SENTINEL_PORTS[0]!, 'INFO', 'sentinel'));
    return (await master()) === primary && /sentinels=3/.test(info);
  });
  return { url: `redis+sentinel://127.0.0.1:${SENTINEL_PORTS[0]},127.0.0.1:${SENTINEL_PORTS[1]},127.0.0.1:${SENTINEL_PORTS[2]}/${MASTER_NAME}`, master };
}
