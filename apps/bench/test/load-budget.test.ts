/** `pnpm bench:load-profile`'s pure parts: what a pg_stat_activity row says, and a request's time split once. */
import { describe, expect, it } from 'vitest';
import { statementOf, stateOf } from '../src/profile/load-budget.ts';
import { type Phase, splitInto } from '../src/profile/load-split.ts';

describe('stateOf', () => {
  it('tells running from waiting, and the database waiting for the app', () => {
    expect(stateOf({ state: 'active', wait_event_type: null, wait_event: null })).toBe('active: on CPU');
    expect(stateOf({ state: 'active', wait_event_type: 'IO', wait_event: 'WALSync' })).toBe(
      'active: IO:WALSync',
    );
    expect(stateOf({ state: 'active', wait_event_type: 'Lock', wait_event: 'transactionid' })).toBe(
      'active: Lock:transactionid',
    );
    expect(
      stateOf({ state: 'idle in transaction', wait_event_type: 'Client', wait_event: 'ClientRead' }),
    ).toBe('idle in transaction');
    expect(stateOf({ state: null, wait_event_type: null, wait_event: null })).toBe('no state');
  });
});

describe('statementOf', () => {
  it('names a statement by its verb and table, Prisma’s quoting and schema left out', () => {
    expect(statementOf('BEGIN')).toBe('begin');
    expect(statementOf('insert into bench_effects (n) values ($1) returning id, at')).toBe(
      'insert into bench_effects',
    );
    expect(
      statementOf(
        'SELECT "public"."api_tokens"."id" FROM "public"."api_tokens" WHERE ("public"."api_tokens"."hash" = $1)',
      ),
    ).toBe('select … from api_tokens');
    expect(statementOf('  update idempotency_keys\n  set state = $1')).toBe('update idempotency_keys');
    expect(statementOf('with claimed as (insert into x) select 1 from idempotency_keys')).toBe(
      'with … from idempotency_keys',
    );
    expect(statementOf('/* traced */ COMMIT')).toBe('commit');
    // The idempotency store's own statements by their label.
    expect(statementOf('/* idem:claim */ with live as (select 1) insert into idempotency_keys')).toBe(
      'idem:claim',
    );
    expect(
      statementOf('/* idem:complete-at-commit */ with completed as (update x) select 1 from completed'),
    ).toBe('idem:complete-at-commit');
    expect(statementOf(null)).toBe('?');
  });
});

describe('splitInto', () => {
  const empty = (): Record<Phase, number> => ({
    holdTransaction: 0,
    holdQuery: 0,
    waitTransaction: 0,
    waitQuery: 0,
    other: 0,
  });

  it('counts two statements waiting at once once, and the rest as other', () => {
    const split = empty();
    splitInto(
      split,
      [
        { phase: 'waitQuery', from: 10, to: 30 },
        { phase: 'waitQuery', from: 15, to: 40 },
        { phase: 'holdQuery', from: 30, to: 45 },
        { phase: 'holdQuery', from: 40, to: 50 },
        { phase: 'waitTransaction', from: 60, to: 70 },
        { phase: 'holdTransaction', from: 70, to: 95 },
      ],
      0,
      100,
    );
    // holding a connection counts over waiting for another one (30–40: one holds, one waits)
    expect(split).toEqual({
      holdTransaction: 25,
      holdQuery: 20,
      waitTransaction: 10,
      waitQuery: 20,
      other: 25,
    });
    expect(Object.values(split).reduce((a, b) => a + b, 0)).toBe(100);
  });

  it('clips what lasts past the answer, or began before the request', () => {
    const split = empty();
    splitInto(split, [{ phase: 'holdTransaction', from: -5, to: null }], 0, 10);
    expect(split.holdTransaction).toBe(10);
    expect(split.other).toBe(0);
  });
});
