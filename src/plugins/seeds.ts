import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as v from 'valibot';
import { describeIssues } from '../config/load.ts';
import type { Collection } from '../db/db.ts';
import type { ServerInstance } from '../instance.ts';
import { COMPOSITION_COLLECTION, INTERACTION_LINK_COLLECTION } from './collections.ts';
import type { LoadedPlugin } from './loader.ts';
import { defaultExport } from '../typescript.ts';

export const SEED_FILES = { compositions: 'config/compositions.js', interactionLinks: 'config/interactionLinks.js' } as const;

/** Frontend paths of the login and logout pages (SPEC.md "Landing seeds"): never a composition's. */
const RESERVED_PATHS = new Set(['login', 'logout']);

export class SeedError extends Error {
  override name = 'SeedError';
}

const text = v.pipe(v.string(), v.minLength(1));
const id = v.pipe(v.string(), v.minLength(1), v.maxLength(128));

/** SPEC.md "Landing seeds", CONTRACT section 6. Other fields are kept as given (the frontend's). */
const compositionSchema = v.looseObject({
  _id: id,
  pathname: v.objectWithRest({ default: v.string() }, v.string()),
  widgetsLayout: v.array(
    v.array(
      v.looseObject({
        column: v.unknown(),
        widget: v.looseObject({ uuid: text, name: text, pluginKey: text }),
      }),
    ),
  ),
});

const interactionLinkSchema = v.looseObject({
  _id: id,
  composition: id,
  slotType: v.optional(text),
  triggers: v.optional(v.array(v.looseObject({ type: text, settings: v.optional(v.looseObject({})) }))),
  isLandingPage: v.optional(v.boolean()),
});

type Composition = v.InferOutput<typeof compositionSchema>;
type InteractionLink = v.InferOutput<typeof interactionLinkSchema>;

/** A seed and where it came from, for messages: `config/compositions.js` or `plugin "svc__cache"`. */
interface Sourced<T> {
  doc: T;
  source: string;
}

/** The forms a seed file may take: JavaScript (ESM or CommonJS) or TypeScript, as svc.config may. */
const SEED_EXTENSIONS = ['.js', '.mjs', '.cjs', '.ts', '.mts', '.cts'];

/**
 * Loads a seed file (`config/compositions.js`, or the same name as .mjs/.cjs/.ts/.mts/.cts) with
 * `import()`: the default export (ESM) or `module.exports` (CommonJS) must be an array. Null when
 * there is none; two forms of one file stop start-up (which one is meant?).
 */
async function loadFile(appRoot: string, relative: string): Promise<{ entries: unknown[]; source: string } | null> {
  const stem = relative.replace(/\.js$/, '');
  const found = SEED_EXTENSIONS.map((ext) => stem + ext).filter((f) => existsSync(path.join(appRoot, f)));
  if (found.length > 1) throw new SeedError(`more than one ${path.basename(stem)} seed file: ${found.join(', ')} (keep one)`);
  const [source] = found;
  if (!source) return null;
  const file = path.join(appRoot, source);
  let mod: { default?: unknown };
  try {
    // A second start in one process (tests) must see the file as it is now: CommonJS modules are
    // cached by path, ES modules by URL. (A whole number: a dot in the query would read as the file's
    // extension to a TypeScript loader.)
    delete createRequire(import.meta.url).cache[file];
    mod = (await import(`${pathToFileURL(file).href}?mtime=${Math.round(statSync(file).mtimeMs * 1000)}`)) as { default?: unknown };
  } catch (err) {
    throw new SeedError(`${source} cannot be loaded: ${(err as Error).message}`, { cause: err });
  }
  const entries = defaultExport(mod);
  if (!Array.isArray(entries)) throw new SeedError(`${source}: the default export must be an array (export default [...] or module.exports = [...])`);
  return { entries, source };
}

function validate<T>(schema: v.GenericSchema<unknown, T>, entries: readonly unknown[], source: string, kind: string): Sourced<T>[] {
  return entries.map((entry, i) => {
    const parsed = v.safeParse(schema, entry);
    if (parsed.success) return { doc: parsed.output, source };
    const rawId = (entry as { _id?: unknown } | null)?._id;
    const name = typeof rawId === 'string' && rawId ? `${kind} "${rawId}"` : `${kind} at index ${i}`;
    throw new SeedError(`${source}: ${name} is not valid: ${describeIssues(parsed.issues).join('; ')}`);
  });
}

function noDuplicates<T extends { _id: string }>(seeds: Sourced<T>[], kind: string): void {
  const seen = new Map<string, string>();
  for (const { doc, source } of seeds) {
    const other = seen.get(doc._id);
    if (other) throw new SeedError(`${kind} "${doc._id}" is seeded twice: by ${other} and by ${source}`);
    seen.set(doc._id, source);
  }
}

/**
 * The seeds of an app root and its plugins, checked without a database: valid shapes, no id seeded
 * twice, no composition at `/login` or `/logout`, and at most one landing page (exactly one when the
 * app seeds anything). Throws SeedError naming the file and the id. Also what `svc doctor` runs.
 */
export async function checkedSeeds(appRoot: string, plugins: Pick<LoadedPlugin, 'key' | 'seeds'>[]) {
  const [appCompositions, appLinks] = [await loadFile(appRoot, SEED_FILES.compositions), await loadFile(appRoot, SEED_FILES.interactionLinks)];
  const compositions = [
    ...validate(compositionSchema, appCompositions?.entries ?? [], appCompositions?.source ?? '', 'composition'),
    ...plugins.flatMap((p) => validate(compositionSchema, p.seeds?.compositions ?? [], `plugin "${p.key}" seeds`, 'composition')),
  ];
  const links = [
    ...validate(interactionLinkSchema, appLinks?.entries ?? [], appLinks?.source ?? '', 'interaction link'),
    ...plugins.flatMap((p) => validate(interactionLinkSchema, p.seeds?.interactionLinks ?? [], `plugin "${p.key}" seeds`, 'interaction link')),
  ];
  noDuplicates(compositions, 'composition');
  noDuplicates(links, 'interaction link');

  for (const { doc, source } of compositions) {
    for (const [locale, pathname] of Object.entries(doc.pathname)) {
      if (RESERVED_PATHS.has(pathname.replace(/^\/+|\/+$/g, '').toLowerCase())) {
        throw new SeedError(`${source}: composition "${doc._id}": pathname.${locale} "${pathname}" is reserved (/login and /logout are the frontend's login and logout pages)`);
      }
    }
  }

  const landing = links.filter((l) => l.doc.isLandingPage === true);
  const appSeeds = appCompositions !== null || appLinks !== null;
  if (landing.length > 1 || (appSeeds && landing.length === 0)) {
    const found = landing.length ? `: ${landing.map((l) => `"${l.doc._id}" (${l.source})`).join(', ')}` : ` in ${appLinks?.source ?? `${SEED_FILES.interactionLinks} (the file is missing)`}`;
    throw new SeedError(`exactly one interaction link must have isLandingPage: true; found ${landing.length}${found}`);
  }
  return { compositions, links, landing };
}

/**
 * Landing seeds (SPEC.md "Landing seeds", migration step 5): `config/compositions.js` and
 * `config/interactionLinks.js` of the app root plus the `seeds` plugins export, checked together and
 * upserted by `_id` into `svc__core-composition` / `svc__core-interactionlink` at start-up. Exactly
 * one interaction link is the landing page (the post-login path `/` must not 404); no composition
 * takes `/login` or `/logout`. Any problem stops start-up with a message naming the file and the id.
 */
export async function applySeeds(instance: ServerInstance, plugins: LoadedPlugin[]): Promise<void> {
  const { compositions, links, landing } = await checkedSeeds(instance.config.env.appRoot, plugins);

  const compositionDocs = await instance.db.collection<Composition>(COMPOSITION_COLLECTION);
  const linkDocs = await instance.db.collection<InteractionLink>(INTERACTION_LINK_COLLECTION);
  const seeded = new Set(compositions.map((c) => c.doc._id));
  for (const { doc, source } of links) {
    if (!seeded.has(doc.composition) && !(await compositionDocs.findOne({ _id: doc.composition }))) {
      throw new SeedError(`${source}: interaction link "${doc._id}": composition "${doc.composition}" is neither seeded nor in ${COMPOSITION_COLLECTION}`);
    }
  }

  if (landing.length === 0) {
    // A warning either way (CONTRACT 6); the migration's wording for an app from 0.1.x only: its database
    // holds compositions or interaction links that no seed names (0.1.x kept them there). A new app is not migrating.
    const unseeded = async (docs: Collection<{ _id: string }>, ids: string[]) => (await docs.findOne({ _id: { $nin: ids } })) !== null;
    const fromOldVersion = (await unseeded(compositionDocs, [...seeded])) || (await unseeded(linkDocs, links.map((l) => l.doc._id)));
    const add = `${SEED_FILES.compositions} and ${SEED_FILES.interactionLinks} with one link marked isLandingPage: true`;
    if (fromOldVersion) instance.logger.warn(`no landing page is seeded: add ${add}, or the post-login path / answers 404 (migration step 5)`);
    else instance.logger.warn(`no landing page is seeded: a frontend that lands on / after login needs ${add} (docs/landing-seeds.md)`);
  }

  for (const { doc } of compositions) await compositionDocs.upsert(doc);
  for (const { doc } of links) await linkDocs.upsert(doc);
  // The seeds name the landing page: a link seeded as one by an earlier start is one no longer.
  if (landing[0]) {
    for (const stale of await linkDocs.find({ isLandingPage: true, _id: { $ne: landing[0].doc._id } })) {
      await linkDocs.updateOne({ _id: stale._id }, { $set: { isLandingPage: false } });
      instance.logger.warn({ link: stale._id }, `interaction link "${stale._id}" is no longer the landing page: the seeds name "${landing[0].doc._id}"`);
    }
  }
  if (compositions.length || links.length) {
    // Named by source and by what they hold: "landing seeds applied" beside "no landing page is seeded"
    // read as a contradiction (a plugin's compositions are seeds too, but no landing page).
    const from = [...new Set([...compositions, ...links].map((seed) => seed.source))];
    const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;
    const what = `${count(compositions.length, 'composition')} and ${count(links.length, 'interaction link')} seeded (from ${from.join(', ')})`;
    instance.logger.info({ compositions: compositions.length, interactionLinks: links.length, from }, landing[0] ? `${what}, landing page "${landing[0].doc._id}"` : what);
  }
}
