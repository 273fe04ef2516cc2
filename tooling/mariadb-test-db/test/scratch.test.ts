/** The fixture's promise: a scratch database of its own per call, reachable by the generated client, then gone. */
import { afterAll, describe, expect, it } from 'vitest';
import { createMariadbPrismaClient, createScratchMariadb, type ScratchMariadb } from '../src/index.ts';

const created: ScratchMariadb[] = [];
afterAll(async () => {
  for (const scratch of created) await scratch.drop();
});

describe('createScratchMariadb', () => {
  it('gives each caller its own empty database, which the generated client reads, and drop() removes', async () => {
    const [a, b] = await Promise.all([createScratchMariadb(), createScratchMariadb()]);
    if (!a || !b) throw new Error('no scratch database');
    created.push(a, b);
    expect(a.name).not.toBe(b.name);
    await a.execute(['CREATE TABLE marker (id INT PRIMARY KEY)', 'INSERT INTO marker VALUES (7)']);
    const db = createMariadbPrismaClient(a.url, 1);
    try {
      expect(await db.$queryRawUnsafe('SELECT id FROM marker')).toEqual([{ id: 7 }]);
      expect(await db.$queryRawUnsafe('SELECT DATABASE() AS name')).toEqual([{ name: a.name }]);
    } finally {
      await db.$disconnect();
    }
    await b.execute(['CREATE TABLE marker (id INT PRIMARY KEY)']);
    await a.drop();
    const other = createMariadbPrismaClient(b.url, 1);
    try {
      const left = await other.$queryRawUnsafe<Array<{ name: string }>>(
        `SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN ('${a.name}', '${b.name}')`,
      );
      expect(left).toEqual([{ name: b.name }]);
    } finally {
      await other.$disconnect();
    }
  });
});
