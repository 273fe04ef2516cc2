/** What the stores bench needs from each store: one file per store exports a factory of this shape. */
import type { IdempotencyStore } from '@idem/idempotency';

export interface StoreUnderTest {
  /** As printed in the tables, e.g. `PostgreSQL 15.14`. */
  name: string;
  /** The server's durability settings that decide a commit's cost (printed beside the figures). */
  durability: string;
  store: IdempotencyStore<unknown>;
  /** Disconnects and drops the scratch database. */
  close(): Promise<void>;
}

/** Creates a scratch database with the library's key table, and a store on a pool of `connections`. */
export type StoreFactory = (connections: number) => Promise<StoreUnderTest>;

/**
 * A store under test whose key table lives in a scratch database (a server's, or a file) that `drop` removes:
 * closing disconnects `db` first, since the database cannot go while its connections are open.
 */
export function onScratchDatabase(
  db: { $disconnect(): Promise<void> },
  drop: () => Promise<void>,
  described: Omit<StoreUnderTest, 'close'>,
): StoreUnderTest {
  return {
    ...described,
    async close() {
      await db.$disconnect();
      await drop();
    },
  };
}
