// Preloaded into an svc process by test/resilience/soak.test.ts (NODE_OPTIONS="--import tsx --import
// <this file>"): once a second one JSON line on stdout, {"msg":"heapstat","t":<s>,"rss","heapTotal",
// "heapUsed","external"} in MiB, so the soak can tell V8 sizing its heap from a growing live heap.
// Test instrumentation only: an unref'd timer that never keeps the process alive or changes it.
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
