/**
 * The request's transaction sent by hand, with no middleware: THE handler's insert alone, and between the store's
 * own claim and completion (recorded-statements.ts), over node-pg and over Prisma. What the SQL and Prisma arms
 * of the profiles time, each on a new key.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import type pg from 'pg';
import { INSERT_EFFECT, insertEffect } from '../peers/effect.ts';
import type { IdemStatements } from './recorded-statements.ts';

/** Where an arm's keys go: a scope and procedure of its own, so that no two arms claim in the same key space. */
export interface KeySpace {
  scope: string;
  procedure: string;
}

/** BEGIN, insert, COMMIT: the unprotected transaction, one round trip each. */
export async function insertTransaction(sql: pg.Client): Promise<void> {
  await sql.query('begin');
  await sql.query(INSERT_EFFECT, [1]);
  await sql.query('commit');
}

/**
 * BEGIN, claim, insert, complete, COMMIT, one round trip each; `named`: each statement prepared once on the
 * connection under its own name (claim, insert, complete), as a pool with named statements sends them.
 */
export async function idemTransaction(
  sql: pg.Client,
  statements: IdemStatements,
  { scope, procedure }: KeySpace,
  named: boolean,
): Promise<void> {
  const key = randomUUID();
  const send = (name: string, text: string, values: unknown[]) =>
    sql.query(named ? { name, text, values } : { text, values });
  await sql.query('begin');
  await send('claim', statements.claim, statements.claimParams(scope, procedure, key));
  await send('insert', INSERT_EFFECT, [1]);
  await send('complete', statements.complete, statements.completeParams(scope, procedure, key));
  await sql.query('commit');
}

/** The same claim, insert and completion in Prisma's `$transaction`, through `$queryRawUnsafe`. */
export function prismaIdemTransaction(
  db: Database,
  statements: IdemStatements,
  { scope, procedure }: KeySpace,
): Promise<void> {
  return db.$transaction(async (tx) => {
    const key = randomUUID();
    await tx.$queryRawUnsafe(statements.claim, ...statements.claimParams(scope, procedure, key));
    await insertEffect(tx, 1);
    await tx.$executeRawUnsafe(statements.complete, ...statements.completeParams(scope, procedure, key));
  });
}
