import { describe, expect, it } from 'vitest';
import { deviceLabel } from '../../src/auth/origin.ts';

const CHROME_WINDOWS = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
const FIREFOX_LINUX = 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0';

describe('device labels (GET /auth/sessions, audit records)', () => {
  it('reads browser, major version and OS from the User-Agent', () => {
    expect(deviceLabel(CHROME_WINDOWS)).toBe('Chrome 131 on Windows');
    expect(deviceLabel(FIREFOX_LINUX)).toBe('Firefox 133 on Linux');
  });

  it('labels a missing User-Agent, and one bowser cannot read by its first 60 characters', () => {
    expect(deviceLabel('')).toBe('Unknown device');
    const odd = `svc-test-client/${'x'.repeat(80)}`;
    expect(deviceLabel(odd)).toBe(odd.slice(0, 60));
  });

  it('gives each User-Agent its own label while more distinct ones come than the labels kept', () => {
    // More than the cache holds: the oldest go, and each is read again right when asked.
    for (let i = 0; i < 1200; i++) {
      const ua = i % 2 ? CHROME_WINDOWS.replaceAll('131.0', `${100 + (i % 97)}.0`) : FIREFOX_LINUX.replaceAll('133.0', `${i}.0`);
      expect(deviceLabel(ua)).toBe(i % 2 ? `Chrome ${100 + (i % 97)} on Windows` : `Firefox ${i} on Linux`);
    }
    expect(deviceLabel(CHROME_WINDOWS)).toBe('Chrome 131 on Windows');
  });
});
