import { describe, expect, it } from 'vitest';
import { uuidv7 } from '../../src/audit/record.ts';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('audit record ids (UUIDv7)', () => {
  it('are version 7, variant 10, carry the time, and sort in the order they were made, also within one millisecond', () => {
    const at = Date.now() + 10_000; // a millisecond no id was made in yet
    const ids = Array.from({ length: 5000 }, () => uuidv7(at)); // more than one block of random bytes
    for (const id of ids) expect(id).toMatch(UUID_V7);
    expect(parseInt(ids[0]!.replaceAll('-', '').slice(0, 12), 16)).toBe(at);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('differ in their random bits (no block of random bytes handed out twice)', () => {
    const tails = new Set(Array.from({ length: 2000 }, () => uuidv7().slice(19)));
    expect(tails.size).toBe(2000);
  });
});
