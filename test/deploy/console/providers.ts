import type { ConsoleSuite } from './harness.ts';

/** The console's providers page tests (registered inside console-browser.test.ts's describe block). */
export function providersTests(_s: ConsoleSuite): void {}
