// Preloaded into an svc process by test/resilience/soak.test.ts (NODE_OPTIONS="--expose-gc --import
// tsx --import <this file>"). Test instrumentation only, never part of a production process:
//
// - once a second one JSON line on stdout, {"msg":"heapstat","t":<s>,"rss","heapTotal","heapUsed",
//   "external"} in MiB, so the report can show V8 sizing its heap (an unref'd timer that never keeps the
//   process alive or changes it);
// - on SIGUSR2 (sent by the test, which started the process), a full garbage collection, then one line
//   {"msg":"heap-after-gc","seq":<n>,"t":<ms>,"heapUsed","external","arrayBuffers","rss"} in bytes:
//   what the process really holds, whatever V8 decided about the size of its heap. Nothing is exposed
//   over the network; without --expose-gc the line says so ("gc": false) and carries no figures.
export {};

const MiB = 1024 * 1024;
const started = Date.now();
setInterval(() => {
  const m = process.memoryUsage();
  const line = {
    msg: 'heapstat',
    t: Math.round((Date.now() - started) / 1000),
    rss: Math.round(m.rss / MiB),
    heapTotal: Math.round(m.heapTotal / MiB),
    heapUsed: Math.round(m.heapUsed / MiB),
    external: Math.round(m.external / MiB),
  };
  process.stdout.write(`${JSON.stringify(line)}\n`);
}, 1000).unref();

let seq = 0;
process.on('SIGUSR2', () => {
  seq++;
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) {
    process.stdout.write(`${JSON.stringify({ msg: 'heap-after-gc', seq, gc: false })}\n`);
    return;
  }
  const before = performance.now();
  // Twice: objects released by the first collection's weak callbacks and finalizers go in the second.
  gc();
  gc();
  const m = process.memoryUsage();
  const line = {
    msg: 'heap-after-gc',
    seq,
    t: Date.now() - started,
    gcMs: Math.round(performance.now() - before),
    heapUsed: m.heapUsed,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    rss: m.rss,
  };
  process.stdout.write(`${JSON.stringify(line)}\n`);
});
