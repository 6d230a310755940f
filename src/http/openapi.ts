import { toJsonSchema } from '@valibot/to-json-schema';
import type * as v from 'valibot';
import { routeKeyScopes, type RouteDefinition } from './route.ts';

type JsonSchema = Record<string, unknown>;

/** Guards (`v.custom` schemas, which JSON Schema cannot express) and the schema each is documented as. */
const documented = new WeakMap<object, unknown>();

/** Documents `guard` as `schema` (see `plainRecord` in schemas.ts). */
export function documentAs<T extends object>(guard: T, schema: unknown): T {
  documented.set(guard, schema);
  return guard;
}

/** A valibot schema as JSON Schema 2020-12 (OpenAPI 3.1's dialect); transforms are documented by input. */
function jsonSchema(schema: unknown): JsonSchema {
  const { $schema: _, ...rest } = toJsonSchema(schema as v.GenericSchema, {
    target: 'draft-2020-12',
    typeMode: 'input',
    errorMode: 'ignore',
    overrideSchema: ({ valibotSchema }) => (documented.has(valibotSchema) ? jsonSchema(documented.get(valibotSchema)) : undefined),
  }) as JsonSchema;
  return rest;
}

/** `/todo/:_id` -> `/todo/{_id}`. */
const openApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

function parameters(route: RouteDefinition): JsonSchema[] {
  const out: JsonSchema[] = [];
  const pathParams = [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!);
  const paramSchema = route.schema.params ? jsonSchema(route.schema.params) : undefined;
  for (const name of pathParams) {
    out.push({ name, in: 'path', required: true, schema: (paramSchema?.properties as Record<string, JsonSchema> | undefined)?.[name] ?? { type: 'string' } });
  }
  if (route.schema.query) {
    const query = jsonSchema(route.schema.query);
    const required = new Set((query.required as string[] | undefined) ?? []);
    for (const [name, schema] of Object.entries((query.properties as Record<string, JsonSchema> | undefined) ?? {})) {
      out.push({ name, in: 'query', required: required.has(name), schema });
    }
  }
  return out;
}

const errorResponse = { $ref: '#/components/responses/Error' };

/**
 * The OpenAPI 3.1 document of every route mounted through `mountRoutes`: core routes and each
 * plugin's, under its prefix. Request schemas come from the same valibot schemas that validate.
 */
export function buildOpenApi(groups: { prefix: string; routes: RouteDefinition[] }[], info: { title: string; version: string }) {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const { prefix, routes } of groups) {
    for (const route of routes) {
      const path = openApiPath(`${prefix}${route.path}`);
      // A route that takes API keys says which scopes a key needs (CONTRACT 15); others take the cookie only.
      const keyScopes = route.config?.public ? undefined : routeKeyScopes(route);
      const operation: JsonSchema = {
        summary: route.schema.summary,
        ...(route.schema.description ? { description: route.schema.description } : {}),
        tags: route.schema.tags ?? [],
        operationId: `${route.method.toLowerCase()}${path.replace(/[^A-Za-z0-9]+(.)?/g, (_, ch: string | undefined) => (ch ?? '').toUpperCase())}`,
        ...(route.config?.public ? { security: [] } : {}),
        ...(keyScopes ? { security: [{ sessionCookie: [] }, { bearerAuth: [...keyScopes] }], 'x-svc-scopes': [...keyScopes] } : {}),
        parameters: parameters(route),
        ...(route.schema.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(route.schema.body) } } } } : {}),
        responses: { '2XX': { description: 'Success' }, '4XX': errorResponse, '5XX': errorResponse },
        ...(route.config?.type ? { 'x-svc-type': route.config.type } : {}),
      };
      (paths[path] ??= {})[route.method.toLowerCase()] = operation;
    }
  }
  return {
    openapi: '3.1.0',
    info: { ...info, description: 'Every path also answers with the `/api` prefix.' },
    servers: [{ url: '/' }],
    security: [{ sessionCookie: [] }],
    paths,
    components: {
      securitySchemes: {
        sessionCookie: { type: 'apiKey', in: 'cookie', name: 'sid_app', description: 'The session cookie set by POST /auth/login' },
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'svc_<43 base64url characters>',
          description: 'An API key (POST /auth/api-keys, or the device login) in `Authorization: Bearer svc_...`. Only routes whose security lists bearerAuth take one, and the key must hold the scopes listed there (docs/api-keys.md).',
        },
      },
      responses: {
        Error: {
          description: 'An error (CONTRACT section 2)',
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['error'],
                properties: {
                  error: {
                    type: 'object',
                    required: ['code', 'message'],
                    properties: {
                      code: { type: 'string' },
                      message: { type: 'string' },
                      details: { type: 'array', items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } } },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  };
}
