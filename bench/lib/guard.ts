// `node bench/lib/guard.ts <command> [args...]`: runs a non-Node program (redis-server) as a child
// and stops it when the bench goes away, even without a chance to clean up (SIGKILL): every 250 ms
// it checks that its parent is still the one that started it. SIGTERM/SIGINT are forwarded.
import { spawn } from 'node:child_process';

const [command, ...args] = process.argv.slice(2);
if (!command) {
  process.stderr.write('usage: guard <command> [args...]\n');
  process.exit(2);
}
const parent = process.ppid;
const child = spawn(command, args, { stdio: 'inherit' });
const stop = (signal: NodeJS.Signals) => {
  child.kill(signal);
  setTimeout(() => child.kill('SIGKILL'), 2000).unref();
};
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
const watch = setInterval(() => {
  if (process.ppid !== parent) stop('SIGKILL');
}, 250);
child.on('exit', (code, signal) => {
  clearInterval(watch);
  process.exit(code ?? (signal ? 1 : 0));
});
child.on('error', (err) => {
  process.stderr.write(`guard: ${err.message}\n`);
  process.exit(127);
});
