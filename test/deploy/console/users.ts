import type { ConsoleSuite } from './harness.ts';

/** The console's users page tests (registered inside console-browser.test.ts's describe block). */
export function usersTests(_s: ConsoleSuite): void {}
