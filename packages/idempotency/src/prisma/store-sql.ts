/**
 * Every statement of the Postgres store, for one table, in one place (store.ts runs them). Each is labelled
 * (statement-names.ts) so that the pg adapter can prepare it once per connection.
 */
import { labelledStatement } from './statement-names.ts';

export type ClaimParam =
  | 'retentionSeconds'
  | 'owner'
  | 'leaseSeconds'
  | 'cap'
  | 'lockTimeout'
  | 'response'
  | 'httpStatus';
export type ClaimValues = Record<ClaimParam, unknown>;
export interface Statement {
  sql: string;
  /** The statement's parameters after the key and the fingerprint, in order. */
  params: ClaimParam[];
}
export interface ClaimVariant {
  capped: boolean;
  /** Insert the row already completed, with `request.response` (no lease). */
  completed: boolean;
  /** Inside a `transaction()`: set its lock_timeout in this statement. */
  lockTimeout: boolean;
}

export interface StoreStatements {
  selectRecord: string;
  claim(kind: 'claim' | 'takeover', variant: ClaimVariant): Statement;
  renew: string;
  complete: string;
  completeAtCommit: string;
  release: string;
  countReplay: string;
}

/** The statements for `table` (quoted), their parameters $1–$3 the key. */
export function storeStatements(table: string): StoreStatements {
  const where = 'scope = $1 and procedure = $2 and key = $3';
  const selectRecordSql = `
    select scope, procedure, key, fingerprint, state, response, lease_owner,
           coalesce(locked_until > now(), false) as lease_active, created_at, expires_at, replay_count
    from ${table} where ${where}`;
  // A row may be taken over when it has expired (a new request) or when its lease ended while still processing
  // the same request (its owner died). Anything else is live: returned as it is, never overwritten.
  // An expired row whose lease is still live is a request still running (retention < lease): taking it over
  // would run the key twice at once. Same rule as deleteExpiredBatch.
  const expiredRow = `(k.expires_at <= now() and not (k.state = 'processing' and k.locked_until > now()))`;
  const deadLeaseSameRequest = `(k.state = 'processing' and k.locked_until <= now() and k.fingerprint = $4)`;
  const statements = new Map<string, Statement>();

  /*
   * The claim is ONE statement on the happy paths, and it never locks a row it does not write:
   * - `INSERT … ON CONFLICT DO NOTHING` on the primary key: the unique index alone decides who owns the key. A
   *   first request inserts (one statement, a plan as cheap as a plain insert). DO NOTHING takes no lock on an
   *   existing row (DO UPDATE … WHERE false would: that row write made a replay as dear as a first run).
   * - the same statement reads the key's committed row from its snapshot (a plain MVCC read): a duplicate gets
   *   the record back in that one round trip → replay, 409 or 422.
   * - an expired row, or a dead lease of the same request, is taken over by a second statement, an UPDATE whose
   *   WHERE re-checks the rule on the row as it is then (`takeover`): rare.
   * - if another transaction inserted the key after our snapshot, the INSERT waits for it, does nothing, and our
   *   snapshot shows no row: the caller re-reads it (rare: a true race).
   * - `lock_timeout` (transactional mode) is set by `set_config(…, is_local => true)` in the INSERT's own row
   *   source, so it is in force before the INSERT can wait, until the transaction ends: the `SET LOCAL` it
   *   replaces, minus a round trip.
   *
   * The per-principal cap: a NEW row is inserted (or an expired one reused) only while the scope has fewer than
   * `cap` keys `processing` under a live lease; a duplicate of a live key is answered whatever the count. Race
   * trade-off: the count reads the statement's snapshot, so N claims of one principal at the very same moment
   * do not see each other's uncommitted rows and may overshoot the cap by up to N − 1. Acceptable: the cap is a
   * rate limit against one caller hogging the server (pool, provider), not a correctness guarantee — once-only
   * execution still rests on the primary key alone. An exact cap would need a per-scope lock (two more round
   * trips per claim, and in transactional mode the lock would serialize the principal) or a counter row. In
   * transactional mode a claim is invisible to others until it commits — completed — so the count only ever
   * sees external-mode keys. The count is bounded by LIMIT cap and walks the primary key's (scope, …) prefix.
   */
  function statement(kind: 'claim' | 'takeover', variant: ClaimVariant): Statement {
    const name = `${kind}:${variant.capped}:${variant.completed}:${variant.lockTimeout}`;
    const cached = statements.get(name);
    if (cached) return cached;
    // Postgres refuses a parameter the statement never uses: each variant numbers only its own, after the
    // key ($1–$3) and the fingerprint ($4).
    const params: ClaimParam[] = ['retentionSeconds'];
    const $ = (param: ClaimParam) => `$${4 + params.push(param)}`;
    const expires = `now() + make_interval(secs => $5::double precision)`;
    const [state, response, httpStatus, leaseOwner, lockedUntil] = variant.completed
      ? [`'completed'`, $('response'), `${$('httpStatus')}::int`, 'null::uuid', 'null::timestamptz']
      : variant.lockTimeout
        ? // Inside the procedure's transaction: nobody sees the row before it commits, and it commits only with
          // its response (the completion, in the same transaction). So it is written 'completed' at once, with
          // its owner (the completion's fence) and no lease: the completion then changes no indexed column (a HOT
          // update), and a transactional key never leaves a (scope, 'processing') entry in the in-flight index
          // for the scope's later claims to walk until vacuum (measured: claims of a busy principal slowed down
          // linearly, docs/BENCHMARKS.md).
          [`'completed'`, 'null', 'null::int', `${$('owner')}::uuid`, 'null::timestamptz']
        : [
            `'processing'`,
            'null',
            'null::int',
            `${$('owner')}::uuid`,
            `now() + make_interval(secs => ${$('leaseSeconds')}::double precision)`,
          ];
    const cap = variant.capped ? `${$('cap')}::int` : '';
    const inFlight = `(select count(*)::int from (
        select 1 from ${table} where scope = $1 and state = 'processing' and locked_until > now()
        limit ${cap}) as held)`;
    const session = variant.lockTimeout
      ? `(select set_config('lock_timeout', ${$('lockTimeout')}::text, true)) as session`
      : '';
    const sql =
      kind === 'claim'
        ? `
      with ${variant.capped ? `live as (select ${inFlight} as n),` : ''}
      claimed as (
        insert into ${table}
          (scope, procedure, key, fingerprint, state, response, http_status, lease_owner, locked_until,
           created_at, expires_at, replay_count)
        select $1, $2, $3, $4, ${state}, ${response}, ${httpStatus}, ${leaseOwner}, ${lockedUntil},
               now(), ${expires}, 0
        ${session ? `from ${session}` : ''}
        ${variant.capped ? `where (select n from live) < ${cap}` : ''}
        on conflict (scope, procedure, key) do nothing
        returning 1
      )
      select exists (select 1 from claimed) as inserted,
             ${variant.capped ? `(select n from live) >= ${cap}` : 'false'} as at_cap,
             k.scope, k.procedure, k.key, k.fingerprint, k.state, k.response, k.lease_owner,
             coalesce(k.locked_until > now(), false) as lease_active, k.created_at, k.expires_at,
             k.replay_count, (${expiredRow} or ${deadLeaseSameRequest}) as reclaimable
      from (select 1) as one
        left join ${table} as k on k.scope = $1 and k.procedure = $2 and k.key = $3`
        : `
      update ${table} as k set
        fingerprint = $4, state = ${state}, response = ${response}, http_status = ${httpStatus},
        lease_owner = ${leaseOwner}, locked_until = ${lockedUntil}, created_at = now(), expires_at = ${expires},
        replay_count = case when k.expires_at <= now() then 0 else k.replay_count end
      ${session ? `from ${session}` : ''}
      where ${where} and ((${expiredRow}${variant.capped ? ` and ${inFlight} < ${cap}` : ''}) or ${deadLeaseSameRequest})
      returning 1 as updated`;
    const built = { sql: labelledStatement(kind, sql), params };
    statements.set(name, built);
    return built;
  }

  // The owner's statements (renew, complete, release) are fenced by `lease_owner` alone: a row holds an owner
  // only while it is processing (completion and every completed claim set it null, a takeover sets a new one).
  // Naming `state = 'processing'` as well let the planner reach the row through the in-flight index
  // (scope, state), whose (scope, 'processing') range holds, until vacuum, an entry for every key the scope
  // completed since: a busy principal's completions slowed down linearly (measured, docs/BENCHMARKS.md).
  // By the primary key alone, the row is one index probe away.
  const fenced = `${where} and lease_owner = $4::uuid`;
  const renewSql = labelledStatement(
    'renew',
    `update ${table} set locked_until = now() + make_interval(secs => $5::double precision)
     where ${fenced}`,
  );
  const completeSql = labelledStatement(
    'complete',
    `update ${table} set state = 'completed', response = $5, http_status = $6, lease_owner = null,
       locked_until = null
     where ${fenced}`,
  );
  // The completion sent with the COMMIT (fast path, fastPath.deferUntilCommit): its row count cannot be read
  // before the COMMIT runs, so the statement itself fails when it matched no row — an invalid cast, whose error
  // rolls the whole transaction back — and the effect never commits without its response.
  const completeAtCommitSql = labelledStatement(
    'complete-at-commit',
    `with completed as (
       update ${table} set state = 'completed', response = $5, http_status = $6, lease_owner = null,
         locked_until = null
       where ${fenced}
       returning 1)
     select case when count(*) = 1 then 1
       else ('idempotency completion matched ' || count(*) || ' rows: the key is not this transaction''s')::int
     end as completed
     from completed`,
  );
  const releaseSql = labelledStatement('release', `delete from ${table} where ${fenced}`);
  // Statistics: committed without waiting for the WAL flush (synchronous_commit off for this one implicit
  // transaction). A crash may lose the last few counts; a replay never waits on an fsync for them.
  const countReplaySql = labelledStatement(
    'count-replay',
    `update ${table} set replay_count = replay_count + $4::int
     from (select set_config('synchronous_commit', 'off', true)) as session where ${where}`,
  );

  return {
    selectRecord: labelledStatement('find', selectRecordSql),
    claim: statement,
    renew: renewSql,
    complete: completeSql,
    completeAtCommit: completeAtCommitSql,
    release: releaseSql,
    countReplay: countReplaySql,
  };
}
