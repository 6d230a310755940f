import type { ConsoleSuite } from './harness.ts';

/** The console's events page tests (registered inside console-browser.test.ts's describe block). */
export function eventsTests(_s: ConsoleSuite): void {}
