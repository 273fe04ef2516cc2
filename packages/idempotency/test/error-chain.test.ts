/**
 * The walk along a driver error's chain (stores/error-chain.ts) and the three dialects' tests built on it: a code
 * found on the error, on its cause or on Prisma's `meta.driverAdapterError`, or only in a message; nothing found in
 * an unrelated chain, and a cyclic chain walked once.
 */
import { describe, expect, it } from 'vitest';
import { hasMariadbErrno } from '../src/mariadb/sql.ts';
import { hasPostgresCode } from '../src/prisma/sql.ts';
import { isSqliteMissingTable } from '../src/sqlite/sql.ts';
import { someInChain, textOf } from '../src/stores/error-chain.ts';

describe('someInChain', () => {
  it('visits the error, its cause, and the adapter error Prisma keeps in meta, in that order', () => {
    const adapter = { code: 'inner' };
    const cause = { code: 'cause', meta: { driverAdapterError: adapter } };
    const seen: unknown[] = [];
    const found = someInChain({ code: 'outer', cause }, (link) => {
      seen.push(link.code);
      return false;
    });
    expect(found).toBe(false);
    expect(seen).toEqual(['outer', 'cause', 'inner']);
    expect(someInChain({ cause }, (link) => link.code === 'inner')).toBe(true);
  });

  it('walks a cyclic chain once, and stops at a link that is not an object', () => {
    const error: { code: string; cause?: unknown } = { code: 'a' };
    error.cause = { code: 'b', cause: error };
    let visits = 0;
    expect(
      someInChain(error, () => {
        visits += 1;
        return false;
      }),
    ).toBe(false);
    expect(visits).toBe(2);
    expect(someInChain({ cause: 'text' }, (link) => link.code === 'x')).toBe(false);
    expect(someInChain(null, () => true)).toBe(false);
  });

  it("textOf: a link's string field, or '' for anything else", () => {
    expect(textOf('message')).toBe('message');
    expect(textOf(42)).toBe('');
    expect(textOf(undefined)).toBe('');
  });
});

describe('the dialects on the walk', () => {
  it('Postgres: the SQLSTATE as code or originalCode anywhere, in a message, or the given message pattern', () => {
    expect(hasPostgresCode({ cause: { originalCode: '42P01' } }, '42P01')).toBe(true);
    expect(hasPostgresCode({ message: 'error 42P01 raised' }, '42P01')).toBe(true);
    expect(
      hasPostgresCode({ message: 'relation "x" does not exist' }, '42P01', /relation .* does not exist/),
    ).toBe(true);
    expect(hasPostgresCode({ code: '23505', cause: { message: 'other' } }, '42P01', /relation/)).toBe(false);
  });

  it('MariaDB: the errno, or originalCode as text, or the message pattern', () => {
    expect(hasMariadbErrno({ cause: { errno: 1146 } }, 1146)).toBe(true);
    expect(hasMariadbErrno({ meta: { driverAdapterError: { originalCode: '1146' } } }, 1146)).toBe(true);
    expect(hasMariadbErrno({ message: "Table 'x' doesn't exist" }, 1146, /doesn't exist/)).toBe(true);
    expect(hasMariadbErrno({ errno: 1205, message: 'Lock wait timeout' }, 1146, /doesn't exist/)).toBe(false);
  });

  it("SQLite: 'no such table' in a message or the adapter's original message, or its TableDoesNotExist kind", () => {
    expect(isSqliteMissingTable({ cause: { message: 'no such table: keys' } })).toBe(true);
    expect(
      isSqliteMissingTable({ meta: { driverAdapterError: { originalMessage: 'no such table: k' } } }),
    ).toBe(true);
    expect(isSqliteMissingTable({ cause: { kind: 'TableDoesNotExist' } })).toBe(true);
    expect(isSqliteMissingTable({ message: 'database is locked', code: 42 })).toBe(false);
  });
});
