/**
 * Faults injected into a worker from the database it talks to, not from the worker's code: the worker has no
 * test switch. A test names the sessions it means by their `application_name`, set in the connection URL it
 * gives the worker (`?application_name=…`: node-postgres lets the URL override what the code passes, so it
 * reaches both pg-boss's pool and Prisma's), and triggers act on those sessions only. Every other session — the
 * other worker of a run, the runs beside it, the other test files on the same database — passes a trigger's
 * WHEN clause untouched.
 *
 * The faults:
 * - pause before the receipt: the receipt insert sleeps inside its statement (BEFORE INSERT on outbox_emails):
 *   the shipment has committed, the receipt has not.
 * - pause before the ack: pg-boss's completion of the job sleeps inside its UPDATE (BEFORE UPDATE on the job
 *   table, to state `completed`): the receipt has committed, the job is still `active`, and the sleeping UPDATE
 *   holds the job row's lock, so no monitor can expire the job until the session ends.
 * - receipt kind per delivery (the dedupe-off control): the receipt's kind `receipt` becomes
 *   `receipt:<job id>:<retry count>` of the delivery writing it (the job that is active for the order in the
 *   given pg-boss schema), or `receipt:tx<transaction id>` without one, so the unique (order_id, kind) no longer
 *   absorbs a redelivery.
 *
 * Everything lives under one name per installation (a schema holding the rules table and the trigger functions;
 * the triggers carry the same name), and `drop()` ends the sessions still sleeping and removes all of it.
 *
 * A trigger's creation and removal lock the table against the writes in flight, and a session parked in its
 * receipt insert is one until its test ends it; a test that reads the table meanwhile would queue behind the
 * waiting DDL, and the test would never end the session. So every DDL statement here gives up after a short
 * lock_timeout, and is tried again.
 */
import { randomBytes } from 'node:crypto';
import type { Database } from '@idem/db';

/** How long a paused session sleeps: longer than any test, which ends it with `terminate()`. */
export const PAUSE_SECONDS = 600;

export interface SessionFaults {
  pauseBeforeReceipt?: boolean;
  pauseBeforeAck?: boolean;
  receiptKindPerDelivery?: boolean;
  /** pg-boss schema of the deliveries, for the per-delivery kind. */
  jobSchema?: string;
}

export interface FaultySession {
  /** The sessions' `application_name`. */
  applicationName: string;
  /** The connection URL to give the worker: `url` with the application_name in its query. */
  url: string;
}

export interface FaultTriggers {
  /** The name of everything installed (schema, triggers) and the prefix of every session's application_name. */
  readonly name: string;
  /** A fresh application_name carrying `faults`, and `url` with it. */
  session(url: string, faults: SessionFaults): Promise<FaultySession>;
  /** Installs the pause before the ack on a pg-boss schema's job table (once pg-boss has created it). */
  watchJobs(jobSchema: string): Promise<void>;
  /** How many of the session's connections are sleeping in a pause now. */
  parked(applicationName: string): Promise<number>;
  /** Ends every connection of the session (a killed process leaves its sleeping backend behind); waits for them. */
  terminate(applicationName: string): Promise<number>;
  /** Ends every session of this installation, then drops its schema, functions and triggers. */
  drop(): Promise<void>;
}

/** Per try of a DDL statement; DDL_DEADLINE_MS over all tries. */
const DDL_LOCK_TIMEOUT = '500ms';
const DDL_DEADLINE_MS = 60_000;

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;
const quoteLiteral = (value: string) => `'${value.replaceAll("'", "''")}'`;

function lockTimedOut(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const meta = 'meta' in error ? JSON.stringify(error.meta) : '';
  return /55P03|lock timeout/.test(`${error.message} ${meta}`);
}

async function ddl(db: Database, sql: string): Promise<void> {
  const deadline = Date.now() + DDL_DEADLINE_MS;
  for (;;) {
    try {
      await db.$transaction([
        db.$executeRawUnsafe(`set local lock_timeout = '${DDL_LOCK_TIMEOUT}'`),
        db.$executeRawUnsafe(sql),
      ]);
      return;
    } catch (error) {
      if (!lockTimedOut(error) || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

export async function installFaultTriggers(db: Database): Promise<FaultTriggers> {
  const name = `idem_fault_${randomBytes(5).toString('hex')}`;
  const schema = quoteIdent(name);
  const prefix = `${name}_`;
  const ownSession = `starts_with(current_setting('application_name'), ${quoteLiteral(prefix)})`;
  let sessions = 0;

  const statements = [
    `create schema ${schema}`,
    `create table ${schema}.rules (
       application_name text primary key,
       pause_before_receipt boolean not null,
       pause_before_ack boolean not null,
       receipt_kind_per_delivery boolean not null,
       job_schema text
     )`,
    `create function ${schema}.before_receipt() returns trigger language plpgsql as $fn$
     declare
       rule ${schema}.rules;
       job_id text;
       job_retry_count integer;
     begin
       select * into rule from ${schema}.rules where application_name = current_setting('application_name');
       if not found then
         return new;
       end if;
       if rule.receipt_kind_per_delivery and new.kind = 'receipt' then
         if rule.job_schema is not null then
           execute format(
             'select id::text as id, retry_count from %I.job
                where name = ''fulfilment'' and state = ''active'' and data->>''orderId'' = $1',
             rule.job_schema)
             into job_id, job_retry_count using new.order_id::text;
         end if;
         new.kind := case
           when job_id is null then 'receipt:tx' || txid_current()
           else 'receipt:' || job_id || ':' || job_retry_count
         end;
       end if;
       if rule.pause_before_receipt then
         perform pg_sleep(${PAUSE_SECONDS});
       end if;
       return new;
     end
     $fn$`,
    `create function ${schema}.before_completion() returns trigger language plpgsql as $fn$
     begin
       if exists (select 1 from ${schema}.rules
                   where application_name = current_setting('application_name') and pause_before_ack) then
         perform pg_sleep(${PAUSE_SECONDS});
       end if;
       return new;
     end
     $fn$`,
    `create trigger ${schema} before insert on public.outbox_emails for each row
       when (${ownSession}) execute function ${schema}.before_receipt()`,
  ];
  for (const sql of statements) await ddl(db, sql);

  const terminateWhere = async (condition: string, value: string) => {
    const rows = await db.$queryRawUnsafe<Array<{ ended: boolean }>>(
      `select pg_terminate_backend(pid, 5000) as ended from pg_stat_activity
        where ${condition} and pid <> pg_backend_pid()`,
      value,
    );
    return rows.filter((row) => row.ended).length;
  };

  return {
    name,
    async session(url, faults) {
      sessions += 1;
      const applicationName = `${prefix}${sessions}`;
      await db.$executeRawUnsafe(
        `insert into ${schema}.rules values ($1, $2, $3, $4, $5)`,
        applicationName,
        faults.pauseBeforeReceipt ?? false,
        faults.pauseBeforeAck ?? false,
        faults.receiptKindPerDelivery ?? false,
        faults.jobSchema ?? null,
      );
      const withName = new URL(url);
      withName.searchParams.set('application_name', applicationName);
      return { applicationName, url: withName.toString() };
    },
    async watchJobs(jobSchema) {
      // On the partitioned parent: Postgres clones the trigger onto every partition, present and future.
      await ddl(
        db,
        `create trigger ${schema} before update on ${quoteIdent(jobSchema)}.job for each row
           when (new.state = 'completed' and old.state <> 'completed' and ${ownSession})
           execute function ${schema}.before_completion()`,
      );
    },
    async parked(applicationName) {
      const rows = await db.$queryRawUnsafe<Array<{ n: number }>>(
        `select count(*)::int as n from pg_stat_activity where application_name = $1 and wait_event = 'PgSleep'`,
        applicationName,
      );
      return rows[0]?.n ?? 0;
    },
    async terminate(applicationName) {
      return terminateWhere('application_name = $1', applicationName);
    },
    async drop() {
      await terminateWhere('starts_with(application_name, $1)', prefix);
      await ddl(db, `drop schema if exists ${schema} cascade`);
    },
  };
}
