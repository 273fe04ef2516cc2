/**
 * Requests that overlap: a duplicate while the first is in flight (409 + Retry-After, or wait and replay), the
 * per-principal cap on keys in flight (429), and many parallel requests with one key (exactly one execution).
 */
import {
  type CheckContext,
  type ConformanceCheck,
  ConformanceCheckId,
  expectExecutions,
  expectFresh,
  expectNothingStored,
  expectReplayOf,
  expectRetryAfterSeconds,
  expectStatus,
  fail,
  retryWhileConflict,
  sleep,
} from '../check.ts';
import { describeSent, isFresh, isReplay, type Sent } from '../client.ts';
import {
  canKeepInFlight,
  inBackground,
  reachedInTime,
  waitUntilClaimed,
  whileInFlight,
} from './in-flight-seams.ts';
import { type KeyedRequest, newRequest, sendExpectingFresh } from './requests.ts';

export const inFlight: ConformanceCheck = {
  id: ConformanceCheckId.inFlight,
  title:
    'same key while the first is still running → 409 + Retry-After (or a wait and a replay), never a second run',
  unavailableReason: (target) =>
    canKeepInFlight(target)
      ? null
      : 'give withHeldExecutions(run) or withSlowExecution(run) (keep the first request in flight)',
  async run(context) {
    const { target } = context;
    const request = newRequest(context);
    const post = () => inBackground(context.client.post(request));
    const { first, duplicate } = await whileInFlight(target, {
      held: async (gate) => {
        const firstAnswer = post();
        await reachedInTime(gate, 1, 'the first request');
        const duplicateAnswer = post();
        // A 409 comes back at once; an app that makes the duplicate wait answers only once the first is done:
        // the first goes on when the duplicate has answered or has waited a while (a replay either way).
        await Promise.race([duplicateAnswer.catch(() => {}), sleep(DUPLICATE_PATIENCE_MS)]);
        await gate.release();
        return { first: await firstAnswer, duplicate: await duplicateAnswer };
      },
      slowed: async () => {
        const firstAnswer = post();
        await sleep(context.options.inFlightProbeDelayMs);
        const duplicateAnswer = await context.client.post(request);
        return { first: await firstAnswer, duplicate: duplicateAnswer };
      },
    });
    expectFresh(first, 'first request');
    // With the gate, the first was held there when its duplicate left: the overlap is known, not measured (an
    // app called in-process answers both within one millisecond of the clock). A latency seam has to be checked.
    if (!target.withHeldExecutions && duplicate.sentAt >= first.receivedAt)
      fail(
        `the first request answered (${first.receivedAt - first.sentAt} ms) before its duplicate was sent: ` +
          'withSlowExecution did not keep it in flight',
      );

    let outcome: string;
    if (isReplay(duplicate)) {
      expectReplayOf(duplicate, first, 'the duplicate (waited, then replayed)');
      outcome = 'the duplicate waited and replayed';
    } else if (duplicate.status === 409) {
      const { final, retries } = await retryConflict(context, duplicate, request, 'the 409');
      expectReplayOf(final, first, `the duplicate's retry after 409`);
      outcome = `409 + Retry-After: ${duplicate.retryAfter}, replayed after ${countRetries(retries)}`;
    } else {
      fail(
        `the duplicate sent while the first was in flight: expected 409 + Retry-After or a replay, got ${describeSent(duplicate)}`,
      );
    }
    await expectExecutions(context, 1, 'first request and its in-flight duplicate');
    return `${outcome}; 1 execution`;
  },
};

export const inFlightCap: ConformanceCheck = {
  id: ConformanceCheckId.inFlightCap,
  title:
    'a NEW key while the principal has maxInFlightPerScope keys in flight → 429 + Retry-After, nothing stored',
  unavailableReason: (target) =>
    target.inFlightCap === undefined
      ? 'give inFlightCap (the procedure’s maxInFlightPerScope, external mode)'
      : canKeepInFlight(target)
        ? null
        : 'give withHeldExecutions(run) or withSlowExecution(run) as well (the first keys must stay in flight)',
  async run(context) {
    const { target } = context;
    const cap = target.inFlightCap;
    if (cap === undefined) return fail('no inFlightCap');
    const held = Array.from({ length: cap }, () => newRequest(context));
    const extraRequest = newRequest(context);
    const sendHeld = () => inBackground(Promise.all(held.map((request) => context.client.post(request))));
    const { answers, extra } = await whileInFlight(target, {
      held: async (gate) => {
        const holders = sendHeld();
        await reachedInTime(gate, cap, `${cap} requests with new keys`);
        const extraAnswer = inBackground(context.client.post(extraRequest));
        // Within the cap the extra key is refused at once; if it runs instead, it stops at the gate too.
        const ranPastTheCap = await Promise.race([
          extraAnswer.then(() => false),
          gate.reached(cap + 1).then(() => true),
        ]);
        await gate.release();
        if (ranPastTheCap) fail(`key ${cap + 1} started executing while ${cap} keys were in flight`);
        return { answers: await holders, extra: await extraAnswer };
      },
      slowed: async () => {
        const holders = sendHeld();
        await waitUntilClaimed(
          context,
          held.map((request) => request.key),
        );
        const extraAnswer = await context.client.post(extraRequest);
        return { answers: await holders, extra: extraAnswer };
      },
    });

    expectStatus(extra, 429, `key ${cap + 1} while ${cap} are in flight`);
    expectRetryAfterSeconds(extra, 'the 429');
    if (extra.replayed !== null) fail('the 429 must not be marked Idempotent-Replayed');
    answers.forEach((sent, index) => {
      expectFresh(sent, `key ${index + 1} of ${cap} (within the cap)`);
    });
    await expectNothingStored(context, extraRequest.key, 'the refused key');
    await sendExpectingFresh(context, extraRequest, 'the refused key once the others finished');
    await expectExecutions(context, cap + 1, `${cap} keys, then the refused one again`);
    return `${cap} keys in flight → key ${cap + 1}: 429 + Retry-After: ${extra.retryAfter}; it ran later`;
  },
};

/**
 * A 409 answered to `request` (`what` names it: "the 409"): it must carry Retry-After in whole seconds, and the
 * same request is retried as it says until the answer is something else. The final answer and the retries.
 */
async function retryConflict<TInput>(
  context: CheckContext<TInput>,
  conflict: Sent,
  request: KeyedRequest<TInput>,
  what: string,
) {
  expectRetryAfterSeconds(conflict, what);
  return retryWhileConflict(conflict, () => context.client.post(request), context.options);
}

/** "1 retry", "2 retries". */
const countRetries = (retries: number) => `${retries} retr${retries === 1 ? 'y' : 'ies'}`;

/** How long a duplicate may wait for the first request before the gate lets the first one go. */
const DUPLICATE_PATIENCE_MS = 2_000;

export const concurrency: ConformanceCheck = {
  id: ConformanceCheckId.concurrency,
  title:
    'N parallel requests with one key → exactly 1 execution; every other answer is the replay, or a 409 that becomes it',
  unavailableReason: () => null,
  async run(context) {
    const parallel = context.options.concurrency;
    const request = newRequest(context);
    const answers = await Promise.all(Array.from({ length: parallel }, () => context.client.post(request)));
    const fresh = answers.filter(isFresh);
    const replays = answers.filter(isReplay);
    const conflicts = answers.filter((sent) => sent.status === 409);
    const others = answers.filter(
      (sent) => !fresh.includes(sent) && !replays.includes(sent) && !conflicts.includes(sent),
    );
    const tally = `${fresh.length} × fresh 2xx, ${replays.length} × replay, ${conflicts.length} × 409, ${others.length} × other`;

    const executed = await context.executionsSinceStart();
    if (executed !== 1)
      fail(
        `${parallel} parallel requests with one key: expected 1 execution, counted ${executed} (${tally})`,
      );
    if (others.length > 0)
      fail(`unexpected answers (${tally}): ${others.slice(0, 3).map(describeSent).join(' | ')}`);
    const [original] = fresh;
    if (!original || fresh.length !== 1) return fail(`expected exactly one fresh 2xx (${tally})`);
    for (const sent of replays) expectReplayOf(sent, original, 'a parallel duplicate');

    let maxRetries = 0;
    const settled: Sent[] = await Promise.all(
      conflicts.map(async (conflict) => {
        const { final, retries } = await retryConflict(context, conflict, request, 'a 409');
        maxRetries = Math.max(maxRetries, retries);
        return final;
      }),
    );
    for (const sent of settled) expectReplayOf(sent, original, 'a 409 retried');
    await expectExecutions(context, 1, `${parallel} parallel requests and the retries of their 409s`);
    const retried = conflicts.length === 0 ? '' : `; every 409 replayed after ≤ ${countRetries(maxRetries)}`;
    return `${parallel} parallel: ${tally}${retried}; 1 execution`;
  },
};
