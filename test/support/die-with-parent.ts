// Preloaded (`node --import`) into every svc process that test/support/spawn.ts starts: when the
// test worker that started it goes away without stopping it (a crash, a kill), the orphaned server
// kills itself instead of holding ports and data-dir locks. An unref'd timer: it never keeps the
// process alive and never changes how it starts or stops.
export {};

const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.kill(process.pid, 'SIGKILL');
}, 500).unref();
