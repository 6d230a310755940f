import * as v from 'valibot';

/** UUID v4 only: version nibble 4, variant 8/9/a/b. */
export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

const id = v.pipe(v.string(), v.regex(UUID_V4, '_id is not a valid uuid v4'));
const name = v.pipe(v.string(), v.trim(), v.minLength(1, 'name is required'), v.maxLength(200));
const content = v.pipe(v.string(), v.maxLength(10_000));
const tags = v.pipe(v.array(v.pipe(v.string(), v.minLength(1), v.maxLength(50))), v.maxLength(50));

/** The full item, as stored and returned (SPEC.md "Reference plugin resource"). */
export const todoSchema = v.object({
  _id: id,
  name,
  content: v.optional(content),
  tags,
  owner: v.string(),
  lastEditor: v.string(),
  isDeleted: v.boolean(),
  createdAt: v.pipe(v.string(), v.isoTimestamp()),
  updatedAt: v.pipe(v.string(), v.isoTimestamp()),
});
export type Todo = v.InferOutput<typeof todoSchema>;

/** Create: `_id` optional (generated when omitted); `owner`/`lastEditor` come from the session, never the body. */
export const createTodoSchema = v.strictObject({
  _id: v.optional(id),
  name,
  content: v.optional(content),
  tags: v.optional(tags, []),
  /** Emit `coreTodoCreated` with the response payload. */
  broadcast: v.optional(v.boolean()),
});
export type CreateTodo = v.InferOutput<typeof createTodoSchema>;

/** Update: every field optional; `_id` and `owner` cannot change, so sending them is rejected. */
export const updateTodoSchema = v.strictObject({
  name: v.optional(name),
  content: v.optional(content),
  tags: v.optional(tags),
});
export type UpdateTodo = v.InferOutput<typeof updateTodoSchema>;

export const todoParams = v.object({ _id: id });
