import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';

describe('OpenAPI document', () => {
  let t: TestApp;
  let doc: { openapi: string; paths: Record<string, Record<string, { requestBody?: unknown; parameters: { name: string; in: string }[] }>> };
  beforeAll(async () => {
    t = await createTestApp();
    const res = await t.fetch('/openapi.json');
    expect(res.status).toBe(200);
    doc = await res.json();
  });
  afterAll(() => t?.close());

  it('validates as OpenAPI 3.1', async () => {
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('documents every mounted route (core and plugins) with its request schema', async () => {
    // Every route Hono will answer, except app-wide middleware and the 405 fallbacks (method ALL).
    const routes = t.routes().filter((r) => r.method !== 'ALL');
    expect(routes.length).toBeGreaterThan(25);
    for (const r of routes) {
      const path = r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      const op = doc.paths[path]?.[r.method.toLowerCase()];
      expect(op, `${r.method} ${r.path} is not in the document`).toBeDefined();
    }
    expect(doc.paths['/auth/login']!.post!.requestBody).toMatchObject({
      content: { 'application/json': { schema: { type: 'object', required: ['email', 'password'] } } },
    });
    expect(doc.paths['/svc__todo/todo']!.post!.requestBody).toMatchObject({
      content: { 'application/json': { schema: { type: 'object', required: ['name'] } } },
    });
    expect(doc.paths['/svc__todo/todo/{_id}']!.patch!.parameters).toContainEqual(expect.objectContaining({ name: '_id', in: 'path' }));
    expect(doc.paths['/auth/users']!.get!.parameters.map((p) => p.name).sort()).toEqual(['email', 'limit', 'offset']);
  });

  it('serves an API reference page at /docs and /api/docs', async () => {
    for (const path of ['/docs', '/api/docs']) {
      const res = await t.fetch(path);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/text\/html/);
      expect(await res.text()).toContain('openapi.json');
    }
  });
});
