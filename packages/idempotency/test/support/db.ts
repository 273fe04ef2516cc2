/** Test helpers: this run's database (see the root vitest.config.ts) and unique names per test. */
import { randomBytes, randomUUID } from 'node:crypto';
import { createPrismaClient, type Database } from '@idem/db';

export function databaseUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set: run the tests through the root vitest config.');
  return url;
}

export function connect(max = 10): Database {
  return createPrismaClient({ connectionString: databaseUrl(), max });
}

/** Test files share one database and run in parallel: every test uses scopes of its own. */
export function uniqueScope(): string {
  return `test:${randomUUID()}`;
}

/** A table name no other test uses. */
export function uniqueTableName(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns true (or throws after `timeoutMs`). */
export async function waitUntil(check: () => Promise<boolean> | boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('waitUntil: timed out');
    await sleep(10);
  }
}
