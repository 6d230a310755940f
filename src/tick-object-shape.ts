import { executionAsyncResource } from 'node:async_hooks';

/** One of Node's own `process.nextTick` tick objects, held for the life of the process (see below). */
let kept: object | null = null;

/**
 * Keeps V8's maps of Node's tick objects alive, so that `process.nextTick` stays on its fast path.
 *
 * Node builds each tick object as `{ [async_id_symbol]: ..., [trigger_async_id_symbol]: ..., callback,
 * args }`. V8 defines those four properties one after the other, from one hidden class (map) to the
 * next, and the feedback of each step holds its map weakly. A tick object lives for a moment only: when
 * a few full garbage collections come while none is alive, V8 collects the maps, and the next tick
 * object gets new ones. Each step then differs from what its feedback recorded, V8 marks it megamorphic
 * for good, and optimized code defines the properties through V8's runtime for the rest of the process:
 * `Runtime_DefineKeyedOwnPropertyInLiteral` with `MigrateToMap`, 6.7-7.7% of svc's CPU samples under
 * load on Node 20 (docs/benchmarks.md, stop 83); bare Hono under the same load showed none.
 *
 * One tick object held keeps its map, and through the map's back pointers every map before it: the
 * steps stay monomorphic. Inside a tick's callback, `executionAsyncResource()` is that tick object.
 * Same on Node 20 and 24 (test/unit/tick-object-shape.test.ts).
 */
export function keepTickObjectShape(): void {
  if (kept !== null) return;
  process.nextTick(() => {
    kept = executionAsyncResource();
  });
}
