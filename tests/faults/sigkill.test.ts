/**
 * "Prove it under faults": 3 web processes (the app's test server, apps/web/test/server) against one scratch
 * database and one provider; processes SIGKILL themselves at the idempotency lifecycle's fault points (a
 * decorator of the key store: apps/web/test/server/fault-points.ts) and clients retry across processes. After
 * every run the invariant checker (harness/invariants.ts) looks at the orders, the provider's charges and the
 * idempotency keys.
 *
 * Every protected run has a CONTROL twin with the protection off, showing the fault bites: a naive client
 * (a fresh key per retry), a lease that never ends, or effect ids not derived from the key.
 *
 * No test waits on the clock for something to happen. A payment stays in flight because the provider holds its
 * response (`holdCharges`, released by the test once it has done what it needed meanwhile), not because a latency
 * outlasts the test's next steps; a dead or frozen owner's lease ends because the test moves the row's
 * `locked_until` back past it (`leasePasses`: the database's clock passing it, as the store compares
 * `locked_until > now()`), not because the test sleeps past it. Only the live-owner test is about real time (a
 * lease renewed while it passes): it waits until the database's clock is past the first lease's end.
 */
import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { runCleanup } from '@idem/cleanup';
import { encryptStoredResponses } from '@idem/idempotency';
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Cluster, type FaultEnv } from './harness/cluster.ts';
import { checkInvariants, formatTable, type InvariantReport, type RunFigures } from './harness/invariants.ts';
import { type Attempt, runClient, send, storm } from './harness/load.ts';
import { armedOnce, createScenario, type Scenario, TOKEN } from './harness/scenario.ts';

/** The 409 of a completion fenced because the key's lease was lost (the library's leaseLostError message). */
const LEASE_LOST = 'another attempt with the same Idempotency-Key took over';

/**
 * The web processes' lease. Long: no lease here ends by itself while a test looks at it (a dead owner's ends when
 * the test moves it past, `leasePasses`), and an owner renews it only every 10 s, far apart enough that no renewal
 * comes between a test freezing an owner (a second or so after its claim) and moving its lease past.
 */
const LEASE_SECONDS = 30;
/** The live-owner test's lease, which does pass in real time: renewed every 2 s, so a renewal 4 s late still holds it. */
const SLOW_OWNER_LEASE_SECONDS = 6;
let cluster: Cluster;
/** The cluster's start, also when it outlives beforeAll's timeout (a very slow machine): afterAll closes it. */
let starting: Promise<Cluster> | undefined;
let scenario: Scenario;
const table: RunFigures[] = [];

/**
 * Process #i runs armed at FAULT_POINT_OF[i] from its first start on, disarmed while its once-marker exists (made
 * before the start). A test arms it by removing the marker (`rearm`); the kill writes it again, so the process that
 * replaces the killed one, started with the same environment (`armedEnv`), is disarmed. No restart to arm a point.
 */
const FAULT_POINT_OF = ['after-complete', 'after-claim', 'before-complete'] as const;
const armedEnv: FaultEnv[] = FAULT_POINT_OF.map((point) => armedOnce(point));
const nodeArmedAt = (point: (typeof FAULT_POINT_OF)[number]) => FAULT_POINT_OF.indexOf(point);

beforeAll(async () => {
  for (const env of armedEnv)
    writeFileSync(env.IDEM_FAULT_ONCE ?? '', 'disarmed until a test removes this\n');
  starting = Cluster.start({
    adminUrl: inject('postgresAdminUrl'),
    processes: 3,
    env: { IDEM_LEASE_SECONDS: String(LEASE_SECONDS) },
    nodeEnv: (index) => armedEnv[index] ?? {},
  });
  cluster = await starting;
  scenario = await createScenario(cluster, 'sigkill');
});

afterAll(async () => {
  if (table.length > 0)
    console.log(`\nfault suite (3 × test server, lease ${LEASE_SECONDS} s)\n${formatTable(table)}\n`);
  await (await starting?.catch(() => undefined))?.close();
  for (const env of armedEnv) rmSync(env.IDEM_FAULT_ONCE ?? '', { force: true });
});

const urls = () => cluster.urls();

async function report(attempts: Attempt[], label: string, runs = 1): Promise<InvariantReport> {
  const checked = await checkInvariants(cluster.db, attempts, { label, runs });
  table.push(checked.figures);
  const f = checked.figures;
  console.log(
    `[faults] ${label}: requests=${f.requests} duplicates(orders/charges)=${f.duplicateOrders}/${f.duplicateCharges} ` +
      `lostAcks=${f.lostAcks} stuckKeys=${f.stuckKeys} 5xx=${f.responses5xx} 409=${f.conflicts409} 429=${f.tooMany429} ` +
      `noResponse=${f.noResponse} unanswered=${f.unanswered} executions=${f.executions}`,
  );
  return checked;
}

function expectClean(checked: InvariantReport) {
  expect(checked.violations).toEqual([]);
  expect(checked.figures.unanswered).toBe(0);
}

/** Sends one request to process #index that is expected to die under it; waits for the exit. */
async function sendIntoFault(index: number, key: string, intent: string): Promise<Attempt> {
  const node = cluster.node(index);
  const sent = await send({
    baseUrl: node.url,
    node: index,
    token: TOKEN,
    key,
    intent,
    input: scenario.input(intent),
  });
  expect(sent.status, `process #${index} should have died under the request (${sent.body})`).toBe(0);
  expect(await cluster.waitForExit(index)).toBe(true);
  return sent;
}

/** The key's stored response, decrypted as the web processes read it. */
async function storedResponse(key: string) {
  const store = encryptStoredResponses(createPrismaIdempotencyStore(cluster.db), {
    secrets: [cluster.responseSecret],
  });
  const [row] = await cluster.db.$queryRaw<Array<{ scope: string; procedure: string }>>`
    select scope, procedure from idempotency_keys where key = ${key}`;
  return row ? ((await store.find({ ...row, key }))?.response ?? null) : null;
}

async function keyRow(key: string) {
  const rows = await cluster.db.$queryRaw<
    Array<{ state: string; response: string | null; lease_live: boolean }>
  >`
    select state, response, coalesce(locked_until > now(), false) as lease_live
    from idempotency_keys where key = ${key}`;
  return rows[0] ?? null;
}

/**
 * Time passes for `key`'s lease: its end (`locked_until`) moves `seconds` earlier, as the database's clock moving
 * `seconds` on would make it look. The owner is dead or frozen here, so nothing renews it meanwhile.
 */
async function leasePasses(key: string, seconds: number): Promise<void> {
  const moved = await cluster.db.$executeRaw`
    update idempotency_keys set locked_until = locked_until - make_interval(secs => ${seconds}::double precision)
    where key = ${key} and state = 'processing'`;
  expect(moved, `the key ${key} is processing`).toBe(1);
}

/** Arms process #index at its fault point: its once-marker is removed, so it fires at the next execution. */
function rearm(index: number): void {
  rmSync(armedEnv[index]?.IDEM_FAULT_ONCE ?? '', { force: true });
}

/**
 * Waits until the database's clock is `marginSeconds` past the end of `key`'s FIRST lease of `leaseSeconds` (the
 * claim wrote `created_at` and `locked_until = created_at + lease` in one statement); returns whether the lease
 * is live at that moment (renewed since).
 */
async function untilFirstLeaseOver(
  key: string,
  leaseSeconds: number,
  marginSeconds: number,
): Promise<boolean> {
  for (;;) {
    const [row] = await cluster.db.$queryRaw<Array<{ over: boolean; live: boolean }>>`
      select now() > created_at + make_interval(secs => ${leaseSeconds + marginSeconds}::double precision) as over,
             coalesce(locked_until > now(), false) as live
      from idempotency_keys where key = ${key}`;
    if (!row) throw new Error(`no claim of ${key}`);
    if (row.over) return row.live;
    await sleep(100);
  }
}

describe('idempotency under SIGKILL, 3 processes, one database', () => {
  it('50 parallel same-key requests over 3 processes: one order, one charge, identical answers', async () => {
    const intent = scenario.intent();
    const key = randomUUID();
    // Bounds for a loaded CI machine, not expectations: on one core shared with the other suites the first
    // execution took 20 s (1 s alone), and the 49 others poll with 409s until it ends.
    const attempts = await storm(50, (i) => ({
      urls,
      token: TOKEN,
      intent,
      key,
      firstNode: i % 3,
      input: scenario.input(intent),
      timeoutMs: 90_000,
      deadlineMs: 120_000,
      maxAttempts: 200,
    }));
    const checked = await report(attempts, 'parallel-50 (protected)');
    expectClean(checked);
    expect(checked.figures.executions).toBe(1);
    expect(attempts.filter((a) => a.status === 200).length).toBe(50);

    // CONTROL: the same 50 clients without a shared key (what a client without Idempotency-Key support does).
    const controlIntent = scenario.intent();
    // The same bounds: a control client that gave up on a loaded machine would charge nothing (CI: 46 of 49).
    const control = await storm(50, (i) => ({
      urls,
      token: TOKEN,
      intent: controlIntent,
      firstNode: i % 3,
      input: scenario.input(controlIntent),
      timeoutMs: 90_000,
      deadlineMs: 120_000,
      maxAttempts: 200,
    }));
    const controlChecked = await report(control, 'parallel-50 CONTROL (a key per request)');
    expect(controlChecked.figures.duplicateCharges).toBe(49);
  }, 240_000);

  it('SIGKILL after COMMIT, before the reply (after-complete) → restart → the retry replays; one effect', async () => {
    const runs = 2;
    const attempts: Attempt[] = [];
    const dies = nodeArmedAt('after-complete');
    for (let run = 0; run < runs; run += 1) {
      rearm(dies);
      const intent = scenario.intent();
      const key = randomUUID();
      attempts.push(await sendIntoFault(dies, key, intent));
      expect((await keyRow(key))?.state).toBe('completed'); // the write was committed, the ack was lost
      await cluster.startNode(dies, armedEnv[dies]); // same env: the once-marker keeps it from firing again
      const retry = await runClient({
        urls,
        token: TOKEN,
        intent,
        key,
        firstNode: dies,
        input: scenario.input(intent),
      });
      expect(retry.at(-1)).toMatchObject({ status: 200, replayed: true, node: dies });
      attempts.push(...retry);
    }
    const checked = await report(attempts, 'after-complete (protected)', runs);
    expectClean(checked);

    // CONTROL: the naive client retries the lost ack under a fresh key.
    const control: Attempt[] = [];
    for (let run = 0; run < runs; run += 1) {
      rearm(dies);
      const intent = scenario.intent();
      control.push(await sendIntoFault(dies, randomUUID(), intent));
      await cluster.startNode(dies, armedEnv[dies]);
      control.push(
        ...(await runClient({
          urls,
          token: TOKEN,
          intent,
          naive: true,
          firstNode: dies,
          input: scenario.input(intent),
        })),
      );
    }
    const controlChecked = await report(control, 'after-complete CONTROL (naive retry)', runs);
    expect(controlChecked.figures.duplicateCharges).toBe(runs);
  }, 240_000);

  it('SIGKILL after the claim (after-claim) → 409 + Retry-After within the lease, then exactly one takeover', async () => {
    const runs = 2;
    const attempts: Attempt[] = [];
    const dies = nodeArmedAt('after-claim');
    const other = (dies + 1) % 3;
    for (let run = 0; run < runs; run += 1) {
      rearm(dies);
      const intent = scenario.intent();
      const key = randomUUID();
      attempts.push(await sendIntoFault(dies, key, intent));
      const restarted = cluster.startNode(dies, armedEnv[dies]);
      const early = await send({
        baseUrl: cluster.node(other).url,
        node: other,
        token: TOKEN,
        key,
        intent,
        input: scenario.input(intent),
      });
      expect(early.status).toBe(409);
      expect(early.retryAfter).toMatch(/^\d+$/);
      attempts.push(early);
      await leasePasses(key, LEASE_SECONDS + 1); // the dead owner's lease ends
      await restarted;
      const retries = await storm(10, (i) => ({
        urls,
        token: TOKEN,
        intent,
        key,
        firstNode: i % 3,
        input: scenario.input(intent),
      }));
      expect(retries.filter((a) => a.status === 200 && !a.replayed)).toHaveLength(1); // one takeover
      attempts.push(...retries);
    }
    const checked = await report(attempts, 'after-claim (protected)', runs);
    expectClean(checked);
    expect(checked.figures.executions).toBe(runs);

    // CONTROL: a claim without a (short) lease — the dead owner's key is never taken over: a stuck key and a
    // client that never gets its answer. The same time passes for it as for the protected runs.
    await cluster.restartNode(dies, armedOnce('after-claim', { IDEM_LEASE_SECONDS: '3600' }));
    const intent = scenario.intent();
    const key = randomUUID();
    const control = [await sendIntoFault(dies, key, intent)];
    const restarted = cluster.startNode(dies, armedEnv[dies]);
    await leasePasses(key, LEASE_SECONDS + 1);
    control.push(
      ...(await runClient({
        urls,
        token: TOKEN,
        intent,
        key,
        firstNode: other,
        input: scenario.input(intent),
        maxAttempts: 4,
      })),
    );
    await restarted;
    const controlChecked = await report(control, 'after-claim CONTROL (no lease expiry)');
    const row = await keyRow(key);
    expect(row).toMatchObject({ state: 'processing', lease_live: true });
    controlChecked.figures.stuckKeys = 1; // its owner is dead: stuck until the (1 h) lease ends
    expect(controlChecked.figures.unanswered).toBe(1);
    await cluster.db.$executeRaw`delete from idempotency_keys where key = ${key}`;
  }, 240_000);

  it('SIGKILL between the charge and the completion (before-complete) → takeover after the lease; one charge', async () => {
    const runs = 2;
    const attempts: Attempt[] = [];
    const dies = nodeArmedAt('before-complete');
    for (let run = 0; run < runs; run += 1) {
      rearm(dies);
      const intent = scenario.intent();
      const key = randomUUID();
      attempts.push(await sendIntoFault(dies, key, intent));
      const restarted = cluster.startNode(dies, armedEnv[dies]);
      expect((await keyRow(key))?.state).toBe('processing');
      await leasePasses(key, LEASE_SECONDS + 1);
      await restarted;
      const retries = await storm(10, (i) => ({
        urls,
        token: TOKEN,
        intent,
        key,
        firstNode: i % 3,
        input: scenario.input(intent),
      }));
      expect(retries.filter((a) => a.status === 200 && !a.replayed)).toHaveLength(1);
      attempts.push(...retries);
    }
    const checked = await report(attempts, 'before-complete (protected)', runs);
    expectClean(checked);

    // CONTROL: the same fault with effect ids NOT derived from the key (a fresh order id, so a fresh provider
    // key, per attempt): the takeover (by the restarted process, as configured) charges the card again.
    const perAttempt = armedOnce('before-complete', { IDEM_TEST_EFFECT_ID_PER_ATTEMPT: '1' });
    await cluster.restartNode(dies, perAttempt);
    const intent = scenario.intent();
    const key = randomUUID();
    const control = [await sendIntoFault(dies, key, intent)];
    await Promise.all([cluster.startNode(dies, perAttempt), leasePasses(key, LEASE_SECONDS + 1)]);
    control.push(
      ...(await runClient({
        urls,
        token: TOKEN,
        intent,
        key,
        firstNode: dies,
        maxAttempts: 1,
        input: scenario.input(intent),
      })),
    );
    const controlChecked = await report(control, 'before-complete CONTROL (effect id per attempt)');
    expect(controlChecked.figures.duplicateCharges).toBe(1);
    await cluster.restartNode(dies, armedEnv[dies]);
  }, 240_000);

  it('zombie: an owner frozen (SIGSTOP) past its lease resumes after the takeover and changes nothing (409)', async () => {
    await cluster.holdCharges();
    try {
      const intent = scenario.intent();
      const key = randomUUID();
      const input = scenario.input(intent);
      const zombie = send({ baseUrl: cluster.node(0).url, node: 0, token: TOKEN, key, intent, input });
      // Freeze the owner while it waits on the provider (its charge held there): its order is reserved and
      // committed, no transaction open. Frozen inside the reservation it would hold the product row lock, and the
      // takeover would wait.
      await cluster.chargesHeld(1);
      cluster.pauseNode(0);
      let takeover: Attempt;
      try {
        await leasePasses(key, LEASE_SECONDS + 1); // no renewal from a frozen process: the lease ends
        // The frozen owner's charge response goes out (into its socket); the takeover's charge is not held.
        await cluster.releaseCharges();
        takeover = await send({ baseUrl: cluster.node(1).url, node: 1, token: TOKEN, key, intent, input });
      } finally {
        cluster.resumeNode(0);
      }
      const zombieAnswer = await zombie;
      expect(zombieAnswer.status).toBe(409);
      expect(takeover).toMatchObject({ status: 200, replayed: false });
      const stored = (await storedResponse(key))?.body;
      expect(JSON.parse(takeover.body)).toEqual({ result: { data: JSON.parse(stored ?? 'null') } });
      const replay = await send({ baseUrl: cluster.node(2).url, node: 2, token: TOKEN, key, intent, input });
      expect(replay).toMatchObject({ status: 200, replayed: true, body: takeover.body });
      const checked = await report([zombieAnswer, takeover, replay], 'zombie, frozen owner (protected)');
      expectClean(checked);

      // CONTROL: the naive client gives up on the slow request (its payment held at the provider) and retries
      // under a fresh key.
      await cluster.holdCharges();
      const controlIntent = scenario.intent();
      const controlInput = scenario.input(controlIntent);
      const base = { token: TOKEN, intent: controlIntent, input: controlInput };
      const firstKey = randomUUID();
      const givesUp = new AbortController();
      const firstSent = send({
        ...base,
        baseUrl: cluster.node(0).url,
        node: 0,
        key: firstKey,
        signal: givesUp.signal,
      });
      await cluster.chargesHeld(1);
      givesUp.abort();
      const first = await firstSent;
      expect(first.status).toBe(0);
      const secondSent = send({ ...base, baseUrl: cluster.node(1).url, node: 1, key: randomUUID() });
      await cluster.chargesHeld(2);
      await cluster.releaseCharges();
      const second = await secondSent;
      expect(second).toMatchObject({ status: 200, replayed: false });
      // The abandoned first request finishes on the server.
      await expect.poll(async () => (await keyRow(firstKey))?.state, { timeout: 15_000 }).toBe('completed');
      const controlChecked = await report([first, second], 'zombie CONTROL (naive retry)');
      expect(controlChecked.figures.duplicateCharges).toBe(1);
    } finally {
      await cluster.resetProviderKnobs();
    }
  }, 240_000);

  it('a live owner slower than its lease renews it: the retry gets 409, one execution (control: overtaken)', async () => {
    // Each owner's charge is held at the provider until the database's clock is half a second past its first
    // lease's end; then a retry comes. #0 renews its lease (protected), #2 does not (CONTROL). Both run at once.
    const lease = { IDEM_LEASE_SECONDS: String(SLOW_OWNER_LEASE_SECONDS) };
    await Promise.all([
      cluster.restartNode(0, lease),
      cluster.restartNode(2, { ...lease, IDEM_TEST_NO_LEASE_RENEWAL: '1' }),
    ]);
    await cluster.holdCharges();
    try {
      const slowOwner = (index: number) => {
        const intent = scenario.intent();
        const key = randomUUID();
        const input = scenario.input(intent);
        const owner = send({
          baseUrl: cluster.node(index).url,
          node: index,
          token: TOKEN,
          key,
          intent,
          input,
        });
        const retry = () => send({ baseUrl: cluster.node(1).url, node: 1, token: TOKEN, key, intent, input });
        return { key, owner, retry };
      };
      const renewing = slowOwner(0);
      const notRenewing = slowOwner(2);
      await cluster.chargesHeld(2); // both owners are running, each waiting on its payment
      const [renewedLive, notRenewedLive] = await Promise.all([
        untilFirstLeaseOver(renewing.key, SLOW_OWNER_LEASE_SECONDS, 0.5),
        untilFirstLeaseOver(notRenewing.key, SLOW_OWNER_LEASE_SECONDS, 0.5),
      ]);
      console.log(
        `[faults] slow live owner: ${SLOW_OWNER_LEASE_SECONDS + 0.5} s after the claim the lease is ` +
          `${renewedLive ? 'live' : 'over'} with renewal, ${notRenewedLive ? 'live' : 'over'} without`,
      );
      const protectedRetry = await renewing.retry();
      // The control's retry takes the key over and runs while its owner still waits on the provider: it finds
      // the owner's charge at the provider and settles the order from it. Then the owners' payments are let go.
      const controlRetried = await notRenewing.retry();
      await cluster.releaseCharges();
      const [protectedOwner, controlOwner] = await Promise.all([renewing.owner, notRenewing.owner]);

      expect(protectedRetry.status).toBe(409);
      expect(protectedOwner).toMatchObject({ status: 200, replayed: false });
      expectClean(
        await report([protectedOwner, protectedRetry], 'slow live owner (protected: lease renewed)'),
      );

      // CONTROL: without renewal the lease ends under the running owner; the retry takes over and runs the
      // procedure a second time, concurrently (fenced: the owner's own completion is refused with 409).
      await report([controlOwner, controlRetried], 'slow live owner CONTROL (no renewal)');
      expect(controlRetried).toMatchObject({ status: 200, replayed: false });
      expect(controlOwner.status).toBe(409);
      console.log('[faults] slow live owner CONTROL: 2 overlapping executions of one intent');
    } finally {
      await cluster.resetProviderKnobs();
      await Promise.all([cluster.restartNode(0, armedEnv[0]), cluster.restartNode(2, armedEnv[2])]);
    }
  }, 240_000);

  it('cleanup racing retries of expired keys: every answer is a replay or one fresh execution, never a 500', async () => {
    const keys = 20;
    const intents = Array.from({ length: keys }, () => ({ intent: scenario.intent(), key: randomUUID() }));
    const first = await Promise.all(
      intents.map(({ intent, key }, i) =>
        runClient({
          urls,
          token: scenario.tokenFor(i),
          intent,
          key,
          firstNode: i % 3,
          input: scenario.input(intent),
        }),
      ),
    );
    const keyList = intents.map(({ key }) => key);
    await cluster.db
      .$executeRaw`update idempotency_keys set expires_at = now() - interval '1 minute' where key = any(${keyList})`;

    let stop = false;
    let cleanups = 0;
    let deleted = 0;
    const cleaner = (async () => {
      while (!stop) {
        const summary = await runCleanup(cluster.db, { batchSize: 3 });
        cleanups += 1;
        deleted += summary.idempotencyKeys.deleted;
      }
    })();
    const race = await storm(keys * 5, (i) => {
      const { intent, key } = intents[i % keys] ?? { intent: '', key: '' };
      return {
        urls,
        token: scenario.tokenFor(i % keys),
        intent,
        key,
        firstNode: i % 3,
        input: scenario.input(intent),
      };
    });
    stop = true;
    await cleaner;
    const checked = await report(
      [...first.flat(), ...race],
      `cleanup race (protected, ${cleanups} cleanups, ${deleted} deleted)`,
    );
    expectClean(checked);
    const freshPerKey = new Map<string, number>();
    for (const attempt of race) {
      expect([200, 409]).toContain(attempt.status);
      if (attempt.status === 200 && !attempt.replayed)
        freshPerKey.set(attempt.key, (freshPerKey.get(attempt.key) ?? 0) + 1);
    }
    expect(Math.max(0, ...freshPerKey.values())).toBeLessThanOrEqual(1);
    expect(cleanups).toBeGreaterThan(0);

    // CONTROL: a cleanup that ignores expiry and leases deletes the keys' rows while they run: the same key runs
    // again, concurrently, in another process. Every key's first run is held at the provider (its charge made,
    // the answer not yet back) when the rows go; a retry then claims a key and runs it (it finds the first run's
    // charge at the provider and settles the order from it) while the first still waits. When the payments are
    // let go, each first run's completion is fenced (409 lease lost: its row is gone) and its client re-sends.
    await cluster.holdCharges();
    try {
      const controlIntents = Array.from({ length: 10 }, () => ({
        intent: scenario.intent(),
        key: randomUUID(),
      }));
      const controlKeys = controlIntents.map(({ key }) => key);
      const stormed = storm(50, (i) => {
        const { intent, key } = controlIntents[i % 10] ?? { intent: '', key: '' };
        return {
          urls,
          token: scenario.tokenFor(i % 10),
          intent,
          key,
          firstNode: i % 3,
          input: scenario.input(intent),
        };
      });
      let control: Attempt[];
      try {
        await cluster.chargesHeld(controlIntents.length); // one run per key (its lease is live), each waiting
        const deleted = await cluster.db
          .$executeRaw`delete from idempotency_keys where key = any(${controlKeys})`;
        expect(deleted).toBe(controlIntents.length);
        await expect
          .poll(
            async () =>
              (
                await cluster.db.$queryRaw<Array<{ n: number }>>`
                  select count(*)::int as n from idempotency_keys where key = any(${controlKeys})`
              )[0]?.n,
            { timeout: 30_000, interval: 50 },
          )
          .toBeGreaterThan(0); // claimed again while the first runs wait
      } finally {
        await cluster.releaseCharges();
        control = await stormed;
      }
      const controlChecked = await report(control, 'cleanup race CONTROL (cleanup ignores leases)');
      // A run of the procedure ends in a fresh answer or in a fenced completion (409 lease lost): both count.
      const fencedRuns = control.filter(
        (attempt) => attempt.status === 409 && attempt.body.includes(LEASE_LOST),
      ).length;
      const doubleRuns = controlChecked.figures.executions + fencedRuns - controlIntents.length;
      console.log(
        `[faults] cleanup race CONTROL: ${doubleRuns} extra runs of a running key ` +
          `(${controlChecked.figures.executions} fresh answers, ${fencedRuns} completions fenced)`,
      );
      expect(doubleRuns).toBeGreaterThan(0);
    } finally {
      await cluster.resetProviderKnobs();
    }
  }, 240_000);
});
