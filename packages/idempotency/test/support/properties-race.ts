/**
 * One race: N clients send the same request (same key, same input) at once, each retrying a 409 or a released
 * key; a fast-check scheduler orders every store statement, every procedure effect and, optionally, the moment
 * the first lease expires. Returns the violations of the contract (empty: the run is correct).
 */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import type { ResolvedOptions } from '../../src/core/config.ts';
import { handleExternal } from '../../src/core/external.ts';
import type { HandledRequest, IdempotentRequest } from '../../src/core/request.ts';
import { handleTransactional } from '../../src/core/transactional.ts';
import {
  IdempotencyError,
  IdempotencyErrorCode,
  type IdempotencyRecord,
  type IdempotencyStore,
  type StoredResponse,
} from '../../src/index.ts';
import { newCallLog, scheduledStore } from './properties-scheduled.ts';

export type Outcome = 'ok' | 'declined' | 'transient';

export interface RaceScenario {
  /** One entry per client: what its first attempt's procedure produces (retries produce 'ok'). */
  outcomes: Outcome[];
  /** Whether the first lease expires at a point the scheduler picks. */
  leaseExpires: boolean;
}

export const raceScenario = (maxClients = 5): fc.Arbitrary<RaceScenario> =>
  fc.record({
    outcomes: fc.array(fc.constantFrom<Outcome>('ok', 'ok', 'declined', 'transient'), {
      minLength: 2,
      maxLength: maxClients,
    }),
    leaseExpires: fc.boolean(),
  });

export interface RaceBackend<TTx> {
  store: IdempotencyStore<TTx>;
  request: IdempotentRequest;
  /** Ends the live lease (the database clock passes `locked_until`). */
  expireLease(): Promise<void>;
  /** The procedure's effect: outside (external mode) or written through `tx` (transactional mode). */
  effect(who: string, tx: TTx | undefined): Promise<void>;
  /** Effects that really happened (transactional: committed). */
  effects(): Promise<string[]>;
  storedRecord(): Promise<IdempotencyRecord | null>;
}

export type Mode = 'external' | 'transactional';

export function responseFor(who: string, outcome: Exclude<Outcome, 'transient'>): StoredResponse {
  return outcome === 'ok'
    ? { kind: 'output', httpStatus: 200, body: JSON.stringify({ json: { by: who } }) }
    : { kind: 'error', httpStatus: 402, code: 'PAYMENT_REQUIRED', message: `declined (${who})` };
}

export interface RaceStats {
  /** Scheduling decisions taken (store statements, effects, commits, the lease event). */
  steps: number;
  effects: number;
  takeovers: number;
  /** 409 answers (in progress, lock timeout, lease lost) that the clients then retried. */
  conflicts: number;
  leaseExpired: boolean;
  /** The interleaving: the labels of the scheduled steps, in the order the scheduler released them. */
  interleaving: string;
}

type Seen =
  | { who: string; owner?: string; handled: HandledRequest<StoredResponse | null> }
  | { who: string; error: unknown };

const MAX_ATTEMPTS = 3;

export async function runRace<TTx>(
  s: fc.Scheduler,
  scenario: RaceScenario,
  backend: RaceBackend<TTx>,
  mode: Mode,
  options: ResolvedOptions,
): Promise<{ violations: string[]; stats: RaceStats }> {
  const log = newCallLog();
  const seen: Seen[] = [];
  let leaseExpired = false;

  const lease = scenario.leaseExpires
    ? s.schedule(Promise.resolve('lease expires'), 'clock: the lease expires').then(async () => {
        await backend.expireLease();
        leaseExpired = true;
      })
    : Promise.resolve();

  const client = async (index: number) => {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt += 1) {
      const who = `c${index}.${attempt}`;
      const store = scheduledStore(backend.store, s, who, log);
      const outcome = attempt === 0 ? (scenario.outcomes[index] ?? 'ok') : 'ok';
      const run = async (tx?: TTx) => {
        await s.schedule(Promise.resolve('effect'), `${who} effect`);
        if (outcome === 'transient') return { result: null, response: null };
        const response = responseFor(who, outcome);
        await backend.effect(who, tx);
        return { result: response, response };
      };
      try {
        const handled =
          mode === 'external'
            ? await handleExternal(store, options, backend.request, () => run())
            : await handleTransactional(store, options, backend.request, run);
        seen.push({ who, handled });
        if (handled.kind !== 'released') return;
      } catch (error) {
        seen.push({ who, error });
        // 409: in progress (or fenced): the client retries with the same key. Anything else ends it.
        if (!(error instanceof IdempotencyError && error.httpStatus === 409)) return;
      }
    }
  };

  await s.waitFor(Promise.all([lease, ...scenario.outcomes.map((_, index) => client(index))]));

  const violations: string[] = [];
  const effects = await backend.effects();
  const takeovers = log.claims.filter((claim) => claim.result.claimed && claim.result.takeover).length;
  const record = await backend.storedRecord();

  // 1. No 500-type answer: the layer's only errors here are 409s.
  for (const entry of seen)
    if ('error' in entry && !(entry.error instanceof IdempotencyError && entry.error.httpStatus === 409))
      violations.push(`${entry.who} got a non-409 error: ${String(entry.error)}`);

  // 2. The effect runs at most once, unless a lease expired (then at most once per owner that took over).
  const allowedEffects = mode === 'external' && leaseExpired ? 1 + takeovers : 1;
  if (effects.length > allowedEffects)
    violations.push(`${effects.length} executions (${effects.join(', ')}), allowed ${allowedEffects}`);
  if (new Set(effects).size !== effects.length)
    violations.push(`an attempt ran twice: ${effects.join(', ')}`);

  // 3. At most one completion is stored; every fenced completion answers 409 lease lost.
  const stored = log.completes.filter((complete) => complete.stored);
  if (mode === 'external' && stored.length > 1)
    violations.push(`${stored.length} completions stored: ${stored.map((c) => c.who).join(', ')}`);
  // A completion is stored only by the key's current owner: no other owner's claim ran between the owner's own
  // claim and the completion. "Ran between" only where the log is certain of it (sent after the owner's claim was
  // answered, answered before the completion was sent): a takeover whose answer merely arrived late ran earlier.
  for (const complete of stored) {
    const ownClaim = log.claims
      .filter((claim) => claim.result.claimed && claim.owner === complete.owner)
      .at(-1);
    if (!ownClaim) {
      violations.push(`${complete.who} completed a key it never claimed`);
      continue;
    }
    const takenOver = log.claims.some(
      (claim) =>
        claim.result.claimed &&
        claim.owner !== complete.owner &&
        claim.sent > ownClaim.answered &&
        claim.answered < complete.sent,
    );
    if (takenOver) violations.push(`${complete.who} completed after its lease was taken over`);
  }
  for (const fenced of log.completes.filter((complete) => !complete.stored)) {
    const answer = seen.find((entry) => entry.who === fenced.who);
    const leaseLost =
      answer &&
      'error' in answer &&
      answer.error instanceof IdempotencyError &&
      answer.error.code === IdempotencyErrorCode.leaseLost;
    if (!leaseLost) violations.push(`${fenced.who} was fenced but did not answer 409 lease lost`);
  }

  // 4. Every success a client saw is the one stored response.
  const successes: StoredResponse[] = [];
  for (const entry of seen) {
    if (!('handled' in entry)) continue;
    if (entry.handled.kind === 'executed' && entry.handled.result) successes.push(entry.handled.result);
    if (entry.handled.kind === 'replayed') successes.push(entry.handled.response);
  }
  const executed = seen.filter((entry) => 'handled' in entry && entry.handled.kind === 'executed');
  if (executed.length > 1) violations.push(`${executed.length} clients saw 'executed'`);
  if (successes.length > 0) {
    if (record?.state !== 'completed')
      violations.push(`a client saw a success but the key is ${record?.state}`);
    for (const response of successes)
      if (!isDeepStrictEqual(response, record?.response))
        violations.push(
          `a client saw ${JSON.stringify(response)}, stored ${JSON.stringify(record?.response)}`,
        );
  }
  // 5. The stored response belongs to an attempt whose effect happened (no lost or phantom completion).
  if (record?.state === 'completed' && record.response) {
    const by =
      record.response.kind === 'output'
        ? (JSON.parse(record.response.body) as { json: { by: string } }).json.by
        : /\((.*)\)/.exec(record.response.message)?.[1];
    // Transactional: a stored error is recorded after the procedure's writes were rolled back.
    const rolledBack = mode === 'transactional' && record.response.kind === 'error';
    if (!by || effects.includes(by) === rolledBack)
      violations.push(
        `stored response of ${by}, but its effect ${rolledBack ? 'was kept' : 'did not happen'}`,
      );
  }

  return {
    violations,
    stats: {
      steps: s.report().length,
      effects: effects.length,
      takeovers,
      conflicts: seen.filter((entry) => 'error' in entry).length,
      leaseExpired,
      interleaving: s
        .report()
        .map((task) => task.label)
        .join('|'),
    },
  };
}
