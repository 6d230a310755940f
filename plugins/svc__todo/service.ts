import { randomUUID } from 'node:crypto';
import { AppError, DuplicateKeyError, notFound, type AuthUser, type Collection, type Filter } from '../../src/index.ts';
import type { CreateTodo, Todo, UpdateTodo } from './schemas.ts';

/**
 * The todo service: every rule about todos, no HTTP. Callers pass the acting user; a user sees
 * their own items, an admin sees everyone's. Soft-deleted items are invisible but keep their `_id`.
 */
export class TodoService {
  constructor(private readonly todos: Collection<Todo>) {}

  /** Items the user may see: their own, or all for an admin. */
  private visible(user: AuthUser, extra: Filter = {}): Filter {
    return { ...extra, isDeleted: false, ...(user.isAdmin ? {} : { owner: user.userId }) };
  }

  async list(user: AuthUser): Promise<Todo[]> {
    return this.todos.find(this.visible(user), { sort: { createdAt: 1, _id: 1 } });
  }

  async get(user: AuthUser, id: string): Promise<Todo> {
    const todo = await this.todos.findOne(this.visible(user, { _id: id }));
    if (!todo) throw notFound('No todo with this id');
    return todo;
  }

  async create(user: AuthUser, input: CreateTodo): Promise<Todo> {
    const now = new Date().toISOString();
    const todo: Todo = {
      _id: input._id ?? randomUUID(),
      name: input.name,
      ...(input.content !== undefined ? { content: input.content } : {}),
      tags: input.tags,
      owner: user.userId,
      lastEditor: user.userId,
      isDeleted: false,
      createdAt: now,
      updatedAt: now,
    };
    try {
      return await this.todos.insertOne(todo);
    } catch (err) {
      if (err instanceof DuplicateKeyError) throw new AppError(409, 'already_exists', 'an entry with this id already exists');
      throw err;
    }
  }

  async update(user: AuthUser, id: string, changes: UpdateTodo): Promise<Todo> {
    const todo = await this.todos.updateOne(this.visible(user, { _id: id }), {
      $set: { ...changes, lastEditor: user.userId, updatedAt: new Date().toISOString() },
    });
    if (!todo) throw notFound('No todo with this id');
    return todo;
  }

  /** Soft delete: the record stays, flagged, and its `_id` stays taken. */
  async remove(user: AuthUser, id: string): Promise<Todo> {
    const todo = await this.todos.updateOne(this.visible(user, { _id: id }), {
      $set: { isDeleted: true, lastEditor: user.userId, updatedAt: new Date().toISOString() },
    });
    if (!todo) throw notFound('No todo with this id');
    return todo;
  }

  async removeHard(user: AuthUser, id: string): Promise<Todo> {
    const todo = await this.get(user, id);
    await this.todos.deleteOne({ _id: id });
    return todo;
  }
}
