/**
 * The repo's client sends a transaction's statements one at a time: Prisma's parallel reads of an `include`
 * inside `$transaction` no longer lean on node-postgres' deprecated client queue. CONTROL: a bare PrismaPg in
 * the same process setup prints pg's deprecation for the very same read.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const fixture = path.join(import.meta.dirname, 'fixtures/include-in-transaction.ts');
const PG_QUEUE_DEPRECATION = 'Calling client.query() when the client is already executing a query';

async function readWith(client: 'serial' | 'bare'): Promise<{ orders: number; warnings: string[] }> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', fixture, client], {
    env: process.env,
  });
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}');
}

describe('serialTransactions', () => {
  it('CONTROL: a bare PrismaPg makes pg queue the include reads (its deprecation warning)', async () => {
    const { warnings } = await readWith('bare');
    expect(warnings.some((warning) => warning.includes(PG_QUEUE_DEPRECATION))).toBe(true);
  });

  it('protected: the repo client reads the same with no warning', async () => {
    const bare = await readWith('bare');
    const serial = await readWith('serial');
    expect(serial).toEqual({ orders: bare.orders, warnings: [] });
  });
});
