/** The SQL helpers the store, the operations and the schema share: the table-name rule and the error test. */
import { describe, expect, it } from 'vitest';
import { bareTableName, hasPostgresCode, quoteTable } from '../src/prisma/sql.ts';

describe('table names', () => {
  it('quotes `name` and `schema.name`, and refuses anything else (it is spliced into SQL)', () => {
    expect(quoteTable('idempotency_keys')).toBe('"idempotency_keys"');
    expect(quoteTable('billing.keys')).toBe('"billing"."keys"');
    for (const bad of ['keys; drop table orders', 'a.b.c', '"keys"', '1keys', ''])
      expect(() => quoteTable(bad)).toThrow(`Invalid table name: ${bad}`);
  });

  it('the bare name drops the schema, and refuses what quoteTable refuses', () => {
    expect(bareTableName('billing.keys')).toBe('keys');
    expect(bareTableName('keys')).toBe('keys');
    expect(() => bareTableName('keys; drop table orders')).toThrow('Invalid table name');
  });
});

describe('hasPostgresCode', () => {
  it('without a message pattern, only the SQLSTATE counts', () => {
    expect(hasPostgresCode({ code: '42P01' }, '42P01')).toBe(true);
    expect(hasPostgresCode(new Error('relation "keys" does not exist'), '42P01')).toBe(false);
    expect(hasPostgresCode({ code: '40001' }, '42P01')).toBe(false);
  });

  it('an error without a message, or a cause that is not an object, is read without failing', () => {
    expect(hasPostgresCode({ code: '40001' }, '55P03', /lock timeout/i)).toBe(false);
    expect(hasPostgresCode({ message: 'wrapped', cause: 'lock timeout' }, '55P03', /lock timeout/i)).toBe(
      false,
    );
  });
});
