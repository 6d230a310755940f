import type { ConsoleSuite } from './harness.ts';

/** The console's plugins page tests (registered inside console-browser.test.ts's describe block). */
export function pluginsTests(_s: ConsoleSuite): void {}
