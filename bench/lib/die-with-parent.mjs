// Preloaded (`node --import`) into every process the bench starts: should the bench die without
// stopping it (SIGKILL, a crash), the orphan kills itself instead of holding a port. An unref'd
// timer: it never keeps the process alive and never changes how it serves.
export {};

const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.kill(process.pid, 'SIGKILL');
}, 500).unref();
