/**
 * The database client: Prisma 7 with the pg driver adapter, fenced (`withTransactionFence`: a statement Prisma's
 * transaction timeout overtook never runs outside the transaction). The client is generated into ./generated.
 */
import { withTransactionFence } from '@idem/idempotency/prisma';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client.ts';

export type Database = PrismaClient;

export function createDatabase(connectionString: string): Database {
  return new PrismaClient({ adapter: withTransactionFence(new PrismaPg({ connectionString })) });
}
