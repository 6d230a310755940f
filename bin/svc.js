#!/usr/bin/env node
// The `svc` command. `svc start` runs the service as `npm start` does (bin/start.js). The operator
// commands (`svc doctor`, `svc user create`) run the compiled CLI of an installed package (dist/), and in
// a checkout of svc's sources the TypeScript itself through tsx, so they never wait for a build.
import { existsSync } from 'node:fs';

if (process.argv[2] === 'start') {
  await import('./start.js'); // argv stays: a restart without secrets in the environment (src/secret-env.ts) runs `svc start` again
} else {
  const checkout = existsSync(new URL('../src/cli.ts', import.meta.url));
  if (checkout) (await import('tsx/esm/api')).register();
  const { main } = await import(checkout ? '../src/cli.ts' : '../dist/src/cli.js');
  process.exitCode = await main(process.argv.slice(2));
}
