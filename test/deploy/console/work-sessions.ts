import type { ConsoleSuite } from './harness.ts';

/** The console's work-sessions page tests (registered inside console-browser.test.ts's describe block). */
export function workSessionsTests(_s: ConsoleSuite): void {}
