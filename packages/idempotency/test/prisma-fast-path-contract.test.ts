/**
 * What the Postgres fast path (src/prisma/fast-path/) relies on in node-postgres and in Prisma's pg adapter that
 * neither makes public, read from the installed versions: a release that changes one of them fails this file by
 * name, instead of the fast path quietly sending statements the wrong way.
 */
import { pgAdapter } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ownTableUrl } from './support/db.ts';

interface PooledClient {
  query: unknown;
  getTypeParser: unknown;
  release(): void;
  connection: Record<string, unknown> & { stream: unknown };
}
interface PoolLike {
  connect(): Promise<PooledClient>;
  query: unknown;
  totalCount: unknown;
}

let url: string;
beforeAll(async () => {
  url = await ownTableUrl();
});

describe('node-postgres internals the fast path writes to', () => {
  let pool: PoolLike;
  let dispose: () => Promise<void> = async () => {};
  beforeAll(async () => {
    const adapter = await pgAdapter({ connectionString: url, max: 1 }).connect();
    pool = (adapter as unknown as { underlyingDriver(): PoolLike }).underlyingDriver();
    dispose = () => adapter.dispose();
  });
  afterAll(() => dispose());

  it("Prisma's pg adapter hands out its node-postgres Pool (underlyingDriver)", () => {
    expect(typeof pool.connect).toBe('function');
    expect(typeof pool.query).toBe('function');
    expect(typeof pool.totalCount).toBe('number');
  });

  it("a pooled client's Connection has the extended-protocol writers and the prepared-statement books", async () => {
    const client = await pool.connect();
    try {
      for (const method of ['parse', 'bind', 'describe', 'execute', 'sync', 'on', 'removeListener'])
        expect(typeof client.connection[method], `connection.${method}`).toBe('function');
      for (const books of ['parsedStatements', 'submittedNamedStatements'])
        expect(client.connection[books], `connection.${books}`).toBeTypeOf('object');
      expect(client.connection.stream, 'connection.stream').toBeDefined();
      expect(typeof client.query).toBe('function');
      expect(typeof client.getTypeParser).toBe('function');
    } finally {
      client.release();
    }
  });
});

describe("Prisma's pg adapter transaction", () => {
  it('sends its own BEGIN/COMMIT/ROLLBACK as statements (usePhantomQuery false) on one pooled client (.client)', async () => {
    const adapter = await pgAdapter({ connectionString: url, max: 1 }).connect();
    try {
      const transaction = (await adapter.startTransaction()) as unknown as {
        options: { usePhantomQuery: boolean };
        client: { query: unknown; release: unknown };
        rollback(): Promise<void>;
      };
      expect(transaction.options.usePhantomQuery).toBe(false);
      expect(typeof transaction.client.query).toBe('function');
      expect(typeof transaction.client.release).toBe('function');
      await transaction.rollback();
    } finally {
      await adapter.dispose();
    }
  });
});
