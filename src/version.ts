import { readFileSync } from 'node:fs';

/**
 * This svc's version (`@svc/core`'s package.json): from src/ in a checkout, from dist/src/ in a build
 * or an installed package, the file is one or two folders up.
 */
export const SVC_VERSION: string = (() => {
  for (const relative of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === '@svc/core' && pkg.version) return pkg.version;
    } catch {
      // not this one
    }
  }
  return '0.0.0';
})();
