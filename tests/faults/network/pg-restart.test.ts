/**
 * Postgres restarts under load, on an ISOLATED embedded Postgres (own temp directory, free port): concurrent
 * clients call an external-mode idempotent procedure (lease 2 s) with distinct and repeated keys, retrying 5xx
 * and 409 with the same key (bounded), while `pg_ctl restart -m fast` and then `-m immediate` run mid-load.
 *
 * The procedure writes its effect (forwarding the key, as external mode requires) and then a follow-up write,
 * so a restart between the two leaves an effect behind a 5xx. Control: the same procedure and load without the
 * idempotency layer → duplicate effects.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createPrismaClient, type Database } from '@idem/db';
import { startEmbeddedServer } from '@idem/dev-db/postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { freePort } from '../../setup/free-port.ts';
import { pgCtl } from '../harness/pg-ctl.ts';
import {
  type Attempt,
  callWithRetries,
  createScratchDatabase,
  createTestTRPC,
  requestContext,
} from './support.ts';

let tempDir: string;
let pgdata: string;
let url: string;
let db: Database;
const figures: string[] = [];

beforeAll(async () => {
  tempDir = mkdtempSync(path.join(os.tmpdir(), 'idem-fault-pg-'));
  pgdata = path.join(tempDir, 'pgdata');
  const server = await startEmbeddedServer({ dataDir: pgdata, port: await freePort() });
  // From the first restart on, pg_ctl owns the postmaster; the embedded handle is not used again.
  void server;
  ({ url } = await createScratchDatabase(server.adminUrl, 'idem_fault_restart'));
  db = createPrismaClient({ connectionString: url, max: 8 });
  await db.$executeRawUnsafe(
    `create table fault_effects (id bigserial primary key, scope text not null, key text not null,
       unique (scope, key))`,
  );
  await db.$executeRawUnsafe(
    'create table fault_effects_plain (id bigserial primary key, scope text not null, key text not null)',
  );
  await db.$executeRawUnsafe(
    'create table fault_followups (id bigserial primary key, effect bigint not null)',
  );
});

afterAll(async () => {
  for (const line of figures) console.log(line);
  await db?.$disconnect();
  if (pgdata) await pgCtl(pgdata, ['stop', '-m', 'fast', '-w']).catch(() => {});
  if (tempDir) rmSync(tempDir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function setup() {
  const { t, idempotency } = createTestTRPC(db, { leaseSeconds: 2, retryAfterSeconds: 1 });
  let executions = 0;
  const followUp = async (effect: bigint) => {
    await sleep(25); // e.g. calling out / rendering: the window a restart falls into
    await db.$executeRawUnsafe('insert into fault_followups (effect) values ($1)', effect);
  };
  const inputSchema = z.object({ amount: z.number().int().positive() });
  const router = t.router({
    charge: t.procedure
      .concat(idempotency.external())
      .input(inputSchema)
      .mutation(async ({ ctx }) => {
        executions += 1;
        const { scope, key } = ctx.idempotency;
        // The outside service deduplicates on the forwarded key.
        await db.$executeRawUnsafe(
          'insert into fault_effects (scope, key) values ($1, $2) on conflict do nothing',
          scope,
          key,
        );
        const rows = await db.$queryRawUnsafe<Array<{ id: bigint }>>(
          'select id from fault_effects where scope = $1 and key = $2',
          scope,
          key,
        );
        const id = rows[0]?.id;
        if (id === undefined) throw new Error('effect vanished');
        await followUp(id);
        return { effect: String(id) };
      }),
    chargePlain: t.procedure.input(inputSchema).mutation(async ({ ctx }) => {
      executions += 1;
      const rows = await db.$queryRawUnsafe<Array<{ id: bigint }>>(
        'insert into fault_effects_plain (scope, key) values ($1, $2) returning id',
        ctx.principalId ?? '',
        ctx.headers.get('Idempotency-Key') ?? '',
      );
      const id = rows[0]?.id;
      if (id === undefined) throw new Error('no id');
      await followUp(id);
      return { effect: String(id) };
    }),
  });
  return { createCaller: t.createCallerFactory(router), executions: () => executions };
}

interface LoadResult {
  requests: number;
  retries: number;
  fiveXx: number;
  failed: number;
  acknowledged: Map<string, Set<string>>;
  attempts: Attempt[];
}

/**
 * CLIENTS workers drain at least OPS logical requests: every 5th reuses an earlier key (same input) so duplicates
 * are concurrent and sequential. `fault` starts once FAULT_AFTER requests have been answered (the load is under
 * way), and the workers go on taking new requests until it has finished, so the restart always falls into the
 * load, however long it or the load takes.
 */
async function load(
  send: (
    scope: string,
    key: string,
  ) => ReturnType<typeof callWithRetries<{ effect: string }, ReturnType<typeof requestContext>>>,
  scope: string,
  fault: () => Promise<unknown>,
): Promise<LoadResult> {
  const CLIENTS = 6;
  const OPS = 90;
  const FAULT_AFTER = 12;
  const keys: string[] = [];
  const keyAt = (index: number) => {
    while (keys.length <= index) {
      const at = keys.length;
      const reuse = at % 5 === 4 ? keys[at - 2] : undefined;
      keys.push(reuse ?? `k-${at}-${Math.random().toString(36).slice(2)}`);
    }
    return keys[index] ?? '';
  };
  const result: LoadResult = {
    requests: 0,
    retries: 0,
    fiveXx: 0,
    failed: 0,
    acknowledged: new Map(),
    attempts: [],
  };
  let next = 0;
  let answered = 0;
  let faultDone = false;
  let startFault: () => void = () => {};
  const loadUnderWay = new Promise<void>((resolve) => {
    startFault = resolve;
  });
  const faulted = loadUnderWay.then(fault).finally(() => {
    faultDone = true;
  });
  const worker = async () => {
    while (next < OPS || !faultDone) {
      const key = keyAt(next++);
      const outcome = await send(scope, key);
      answered += 1;
      if (answered >= FAULT_AFTER) startFault();
      result.requests += outcome.attempts.length;
      result.retries += outcome.attempts.length - 1;
      result.fiveXx += outcome.attempts.filter((attempt) => attempt.status >= 500).length;
      result.attempts.push(...outcome.attempts);
      if (!outcome.ok || !outcome.value) {
        result.failed += 1;
        continue;
      }
      const seen = result.acknowledged.get(key) ?? new Set<string>();
      seen.add(outcome.value.effect);
      result.acknowledged.set(key, seen);
    }
  };
  await Promise.all([...Array.from({ length: CLIENTS }, worker), faulted]);
  return result;
}

// Generous: on a loaded 2-core CI machine an `-m immediate` restart (crash recovery) can take several
// seconds, and every client must outlast it with the same key.
const retry = { maxAttempts: 200, delayMs: 150, maxRetryAfterMs: 1_000 };

describe.each(['fast', 'immediate'] as const)('pg_ctl restart -m %s under load', (mode) => {
  it('protected: no duplicate effect, nothing acknowledged lost, no key left processing (control: duplicates)', async () => {
    const { createCaller, executions } = setup();
    const scope = `restart-${mode}`;
    const restart = () =>
      pgCtl(pgdata, ['restart', '-m', mode, '-w', '-t', '60', '-l', path.join(pgdata, 'restart.log')]);

    const result = await load(
      (s, key) =>
        callWithRetries(
          (ctx) => createCaller(ctx).charge({ amount: 1 }),
          () => requestContext(key, s),
          retry,
        ),
      scope,
      restart,
    );
    const effects = await db.$queryRawUnsafe<Array<{ id: bigint; key: string }>>(
      'select id, key from fault_effects where scope = $1',
      scope,
    );
    const effectIds = new Set(effects.map((effect) => String(effect.id)));
    const stuck = await db.$queryRawUnsafe<Array<{ n: number }>>(
      // Stuck = still processing after its lease ended (a live lease may belong to a request still running).
      "select count(*)::int as n from idempotency_keys where scope = $1 and state = 'processing' and locked_until < now()",
      scope,
    );
    const inconsistent = [...result.acknowledged.values()].filter((ids) => ids.size > 1).length;
    const lost = [...result.acknowledged.values()]
      .flatMap((ids) => [...ids])
      .filter((id) => !effectIds.has(id)).length;
    const distinct = result.acknowledged.size;
    figures.push(
      `[faults/network] pg restart -m ${mode} | protected | requests=${result.requests} retries=${result.retries} ` +
        `5xx=${result.fiveXx} 409=${result.attempts.filter((a) => a.status === 409).length} failed=${result.failed} ` +
        `keys=${distinct} executions=${executions()} effects=${effects.length} duplicates=${effects.length - distinct} ` +
        `inconsistent_acks=${inconsistent} lost_acknowledged=${lost} stuck_keys=${stuck[0]?.n}`,
    );
    expect(result.failed).toBe(0);
    expect(result.fiveXx).toBeGreaterThan(0); // the restart did hit the load
    expect(effects).toHaveLength(distinct);
    expect(inconsistent).toBe(0);
    expect(lost).toBe(0);
    expect(stuck[0]?.n).toBe(0);

    // Control: the same procedure and load, no idempotency layer.
    const controlScope = `restart-${mode}-control`;
    const control = await load(
      (s, key) =>
        callWithRetries(
          (ctx) => createCaller(ctx).chargePlain({ amount: 1 }),
          () => requestContext(key, s),
          retry,
        ),
      controlScope,
      restart,
    );
    const plain = await db.$queryRawUnsafe<Array<{ n: number; keys: number }>>(
      'select count(*)::int as n, count(distinct key)::int as keys from fault_effects_plain where scope = $1',
      controlScope,
    );
    const duplicates = (plain[0]?.n ?? 0) - (plain[0]?.keys ?? 0);
    // Of those, the ones a retry caused (the rest are the deliberately repeated keys).
    const succeeded = [...control.acknowledged.values()].reduce((sum, ids) => sum + ids.size, 0);
    const retryDuplicates = (plain[0]?.n ?? 0) - succeeded;
    figures.push(
      `[faults/network] pg restart -m ${mode} | control | requests=${control.requests} retries=${control.retries} ` +
        `5xx=${control.fiveXx} failed=${control.failed} keys=${control.acknowledged.size} effects=${plain[0]?.n} ` +
        `duplicates=${duplicates} (from retries: ${retryDuplicates})`,
    );
    expect(duplicates).toBeGreaterThan(0);
  }, 60_000);
});
