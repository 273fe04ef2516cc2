/**
 * A response header that carries credentials is never stored, so a replay never hands one client's cookie or
 * token to whoever sends its key: naming one in `replayedHeaders` is refused when the route is set up.
 */
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFetchIdempotency } from '../src/fetch/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { connectWithOwnTable } from './support/db.ts';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable(2);
});
afterAll(async () => {
  await db.$disconnect();
});

describe('replayedHeaders', () => {
  const route = (replayedHeaders: string[]) =>
    createFetchIdempotency({ store: createPrismaIdempotencyStore(db), getScope: () => 'someone' }).external(
      async () => new Response('ok'),
      { replayedHeaders },
    );

  it('control: a header of the response itself may be replayed', () => {
    expect(route(['content-type', 'x-request-id'])).toBeTypeOf('function');
  });

  it('refuses Set-Cookie, Authorization, Proxy-Authorization and Cookie, whatever their case', () => {
    for (const name of ['Set-Cookie', 'authorization', 'Proxy-Authorization', 'cookie'])
      expect(() => route(['content-type', name]), name).toThrow(/credentials/);
  });
});
