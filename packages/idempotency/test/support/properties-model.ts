/**
 * Model-based test support: a model of what the idempotency contract promises (per intent: no row, a claim
 * left by a dead request, or a completed response; one clock), and commands that drive the real handler on
 * the in-memory store the same way and compare every answer and the whole state with the model.
 */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import type { ResolvedOptions } from '../../src/core/config.ts';
import { handleExternal } from '../../src/core/external.ts';
import type { IdempotentRequest } from '../../src/core/request.ts';
import { handleTransactional } from '../../src/core/transactional.ts';
import {
  fingerprintRequest,
  IdempotencyError,
  type IdempotencyStore,
  type StoredResponse,
} from '../../src/index.ts';
import { cleanupExpiredKeys } from '../../src/prisma/index.ts';
import type { MemoryStore, MemoryTx } from './properties-memory-store.ts';

export type Mode = 'external' | 'transactional';
export type Outcome = 'ok' | 'declined' | 'transient';
export type CrashPoint = 'afterClaim' | 'afterEffect' | 'afterComplete';

type Row =
  | { state: 'processing'; owner: string; leaseUntil: number; expiresAt: number }
  | { state: 'completed'; response: StoredResponse; expiresAt: number };

export interface Model {
  mode: Mode;
  options: ResolvedOptions;
  /** Seconds since the start (the database clock). */
  now: number;
  intents: Array<{ row: Row | null }>;
  /** Charges made (the procedure's effect; only an 'ok' outcome charges). */
  charges: number;
  /** Charges made by a request that died before completing: in doubt, deduplicated outside by the key. */
  inDoubtCharges: number;
  /** Completions stored with a success (a charge), over every intent and key lifetime. */
  successfulCompletions: number;
  /** Requests paused after their effect, before completing (a slow request; resumed later). */
  stalled: Array<{ run: string; intent: number; claimedAt: number }>;
  nextRun: number;
  commands: number;
  /** How often each answer was observed (coverage). */
  seen: Record<string, number>;
}

export interface Real {
  mode: Mode;
  options: ResolvedOptions;
  store: MemoryStore;
  /** External mode: the outside provider's charges. Transactional: the store's committed effects. */
  externalCharges: string[];
  stalled: Map<string, { resume: () => void; result: Promise<Observed> }>;
}

export const procedure = 'orders.place';
const scope = 'principal:1';

function requestFor(intent: number): IdempotentRequest {
  return {
    scope,
    procedure,
    key: `intent-${intent}`,
    fingerprint: fingerprintRequest(procedure, { intent }),
  };
}

function responseFor(run: string, outcome: 'ok' | 'declined'): StoredResponse {
  return outcome === 'ok'
    ? { kind: 'output', httpStatus: 200, body: JSON.stringify({ json: { run } }) }
    : { kind: 'error', httpStatus: 402, code: 'PAYMENT_REQUIRED', message: `declined (${run})` };
}

type Observed =
  | { kind: 'executed'; response: StoredResponse }
  | { kind: 'released' }
  | { kind: 'replayed'; response: StoredResponse }
  | { kind: 'conflict' }
  | { kind: 'crashed' }
  | { kind: 'stalled' };

// ---------------------------------------------------------------------------------------------------- model

/** The claim rule: a free key, an expired one (no live lease), or a dead request's claim of the same input. */
function claimable(row: Row | null, now: number): boolean {
  if (!row) return true;
  const liveLease = row.state === 'processing' && row.leaseUntil > now;
  if (row.expiresAt <= now && !liveLease) return true;
  return row.state === 'processing' && row.leaseUntil <= now;
}

function predict(
  model: Model,
  intent: number,
  outcome: Outcome,
  crash: CrashPoint | 'stall' | null,
  run: string,
): Observed {
  const slot = model.intents[intent];
  if (!slot) throw new Error(`no intent ${intent}`);
  const row = slot.row;
  const now = model.now;
  // Transactional: a paused transaction holds the key's row lock; a duplicate's wait times out (409).
  if (model.mode === 'transactional' && model.stalled.some((paused) => paused.intent === intent))
    return { kind: 'conflict' };
  if (!claimable(row, now)) {
    if (row?.state === 'completed') return { kind: 'replayed', response: row.response };
    return { kind: 'conflict' };
  }
  const { leaseSeconds, retentionSeconds } = model.options;
  const processing: Row = {
    state: 'processing',
    owner: run,
    leaseUntil: now + leaseSeconds,
    expiresAt: now + retentionSeconds,
  };
  const charges = outcome === 'ok';
  if (crash === 'stall') {
    model.stalled.push({ run, intent, claimedAt: now });
    // External: the claim and the charge are done; transactional: both wait, uncommitted, for the resume.
    if (model.mode === 'external') {
      slot.row = processing;
      model.charges += 1;
      model.inDoubtCharges += 1;
    }
    return { kind: 'stalled' };
  }
  if (model.mode === 'transactional') {
    // A dead connection rolls the whole transaction back: claim, writes and response; the row is as before.
    if (crash) return { kind: 'crashed' };
    if (outcome === 'transient') return { kind: 'released' };
  } else {
    if (crash === 'afterClaim') {
      slot.row = processing;
      return { kind: 'crashed' };
    }
    if (crash === 'afterEffect') {
      slot.row = processing;
      if (charges) {
        model.charges += 1;
        model.inDoubtCharges += 1;
      }
      return { kind: 'crashed' };
    }
    if (outcome === 'transient') {
      slot.row = null; // released by its owner
      return { kind: 'released' };
    }
  }
  const response = responseFor(run, outcome === 'ok' ? 'ok' : 'declined');
  slot.row = { state: 'completed', response, expiresAt: now + retentionSeconds };
  if (charges) {
    model.charges += 1;
    model.successfulCompletions += 1;
  }
  // afterComplete (external): stored, but the client never heard back.
  return crash ? { kind: 'crashed' } : { kind: 'executed', response };
}

// ----------------------------------------------------------------------------------------------------- real

class ConnectionLost extends Error {
  constructor() {
    super('connection lost (the process died)');
  }
}

const never = () => new Promise<never>(() => {});

async function sendReal(
  real: Real,
  intent: number,
  outcome: Outcome,
  crash: CrashPoint | 'stall' | null,
  run: string,
): Promise<Observed> {
  const request = requestFor(intent);
  let died!: () => void;
  let paused!: () => void;
  const crashed = new Promise<Observed>((resolve) => {
    died = () => resolve({ kind: 'crashed' });
    paused = () => resolve({ kind: 'stalled' });
  });
  let resume!: () => void;
  const gate = new Promise<void>((resolve) => {
    resume = resolve;
  });
  // A process dying: external mode simply never continues (no catch, no release runs); transactional mode
  // loses its connection, so the database rolls the transaction back.
  const die = (): Promise<never> => {
    if (real.mode === 'transactional') throw new ConnectionLost();
    died();
    return never();
  };
  const store: IdempotencyStore<MemoryTx> =
    crash === 'afterComplete'
      ? {
          ...real.store,
          async complete(key, owner, response, tx) {
            await real.store.complete(key, owner, response, tx);
            return die();
          },
        }
      : real.store;
  const procedureRun = async (tx?: MemoryTx) => {
    if (crash === 'afterClaim') return die();
    if (outcome === 'transient') return { result: null, response: null };
    if (outcome === 'ok') {
      const label = `${intent}:${run}`;
      if (real.mode === 'transactional') real.store.recordEffect(label, tx);
      else real.externalCharges.push(label);
    }
    if (crash === 'afterEffect') return die();
    if (crash === 'stall') {
      paused();
      await gate;
    }
    const response = responseFor(run, outcome);
    return { result: response, response };
  };
  const handled = (
    real.mode === 'external'
      ? handleExternal(store, real.options, request, () => procedureRun())
      : handleTransactional(store, real.options, request, procedureRun)
  ).then(
    (result): Observed => {
      if (result.kind === 'executed' && result.result) return { kind: 'executed', response: result.result };
      if (result.kind === 'replayed') return { kind: 'replayed', response: result.response };
      if (result.kind === 'released') return { kind: 'released' };
      throw new Error(`unexpected ${JSON.stringify(result)}`);
    },
    (error: unknown): Observed => {
      if (error instanceof ConnectionLost) return { kind: 'crashed' };
      if (error instanceof IdempotencyError && error.httpStatus === 409) return { kind: 'conflict' };
      throw error; // a 500-type error, or a 422 that should not happen: fails the run
    },
  );
  if (crash === 'stall') real.stalled.set(run, { resume, result: handled });
  return Promise.race([handled, crashed]);
}

function charges(real: Real): string[] {
  return real.mode === 'external' ? real.externalCharges : [...real.store.committedEffects()];
}

/** After every command: the real state is the model's, and the effect accounting holds. */
async function checkInvariants(model: Model, real: Real): Promise<void> {
  const made = charges(real);
  // Every completed success charged exactly once: no duplicate, no lost completed intent. The only other
  // charges are the in-doubt ones of requests that died between charge and completion.
  if (made.length !== model.charges || made.length - model.inDoubtCharges !== model.successfulCompletions)
    throw new Error(
      `charges: real ${made.length}, model ${model.charges} (in doubt ${model.inDoubtCharges}, ` +
        `completed with success ${model.successfulCompletions})`,
    );
  if (new Set(made).size !== made.length) throw new Error(`a run charged twice: ${made.join(', ')}`);
  for (const [intent, slot] of model.intents.entries()) {
    const record = await real.store.find(requestFor(intent));
    const row = slot.row;
    const expected = row && {
      state: row.state,
      response: row.state === 'completed' ? row.response : null,
      leaseActive: row.state === 'processing' && row.leaseUntil > model.now,
      expiresAt: row.expiresAt,
    };
    const actual = record && {
      state: record.state,
      response: record.response,
      leaseActive: record.leaseActive,
      expiresAt: (record.expiresAt.getTime() - START) / 1000,
    };
    if (!isDeepStrictEqual(actual, expected))
      throw new Error(`intent ${intent}: real ${JSON.stringify(actual)}, model ${JSON.stringify(expected)}`);
    // A completed success in the store was charged by the run that stored it.
    if (record?.response?.kind === 'output') {
      const { run } = (JSON.parse(record.response.body) as { json: { run: string } }).json;
      if (!made.includes(`${intent}:${run}`))
        throw new Error(`intent ${intent}: ${run} stored but not charged`);
    }
  }
}

/** The clock's start (ManualClock's epoch): model times are seconds after it. */
export const START = Date.UTC(2026, 0, 1);

// ------------------------------------------------------------------------------------------------- commands

type Cmd = fc.AsyncCommand<Model, Real>;

abstract class Request implements Cmd {
  constructor(
    readonly target: number | 'new',
    readonly outcome: Outcome,
    readonly crash: CrashPoint | 'stall' | null,
  ) {}
  check(model: Readonly<Model>) {
    return this.target === 'new' || model.intents.length > 0;
  }
  async run(model: Model, real: Real) {
    let intent: number;
    if (this.target === 'new') {
      model.intents.push({ row: null });
      intent = model.intents.length - 1;
    } else intent = this.target % model.intents.length;
    const run = `r${model.nextRun++}`;
    const expected = predict(model, intent, this.outcome, this.crash, run);
    const observed = await sendReal(real, intent, this.outcome, this.crash, run);
    model.commands += 1;
    const label = expected.kind;
    model.seen[label] = (model.seen[label] ?? 0) + 1;
    if (!isDeepStrictEqual(observed, expected))
      throw new Error(`${this}: got ${JSON.stringify(observed)}, model says ${JSON.stringify(expected)}`);
    await checkInvariants(model, real);
  }
  abstract toString(): string;
}

class Send extends Request {
  constructor(outcome: Outcome) {
    super('new', outcome, null);
  }
  toString() {
    return `send(new, ${this.outcome})`;
  }
}

class Retry extends Request {
  constructor(target: number, outcome: Outcome) {
    super(target, outcome, null);
  }
  toString() {
    return `retry(#${this.target}, ${this.outcome})`;
  }
}

class Stall extends Request {
  constructor(target: number | 'new') {
    super(target, 'ok', 'stall');
  }
  toString() {
    return `stall(${this.target === 'new' ? 'new' : `#${this.target}`})`;
  }
}

/** A paused request continues: it completes if it still owns the key, else it is fenced (409). */
class Resume implements Cmd {
  constructor(readonly pick: number) {}
  check(model: Readonly<Model>) {
    return model.stalled.length > 0;
  }
  async run(model: Model, real: Real) {
    const [paused] = model.stalled.splice(this.pick % model.stalled.length, 1);
    if (!paused) throw new Error('nothing paused');
    const slot = model.intents[paused.intent];
    if (!slot) throw new Error(`no intent ${paused.intent}`);
    const response = responseFor(paused.run, 'ok');
    let expected: Observed;
    if (model.mode === 'transactional') {
      // The claim was taken when the transaction started; everything commits now.
      slot.row = {
        state: 'completed',
        response,
        expiresAt: paused.claimedAt + model.options.retentionSeconds,
      };
      model.charges += 1;
      model.successfulCompletions += 1;
      expected = { kind: 'executed', response };
    } else if (slot.row?.state === 'processing' && slot.row.owner === paused.run) {
      // Still the owner (even past its lease, if nobody took over): the fenced update succeeds.
      slot.row = { state: 'completed', response, expiresAt: slot.row.expiresAt };
      model.inDoubtCharges -= 1;
      model.successfulCompletions += 1;
      expected = { kind: 'executed', response };
    } else expected = { kind: 'conflict' }; // taken over or cleaned up: fenced, 409 lease lost
    const waiting = real.stalled.get(paused.run);
    if (!waiting) throw new Error(`${paused.run} is not paused`);
    real.stalled.delete(paused.run);
    waiting.resume();
    const observed = await waiting.result;
    model.commands += 1;
    const label = expected.kind === 'conflict' ? 'resumed-fenced' : 'resumed-completed';
    model.seen[label] = (model.seen[label] ?? 0) + 1;
    if (!isDeepStrictEqual(observed, expected))
      throw new Error(`${this}: got ${JSON.stringify(observed)}, model says ${JSON.stringify(expected)}`);
    await checkInvariants(model, real);
  }
  toString() {
    return `resume(${this.pick})`;
  }
}

class Crash extends Request {
  constructor(target: number | 'new', crash: CrashPoint) {
    super(target, 'ok', crash);
  }
  toString() {
    return `crash(${this.target === 'new' ? 'new' : `#${this.target}`}, ${this.crash})`;
  }
}

class AdvanceClock implements Cmd {
  constructor(readonly seconds: number) {}
  check() {
    return true;
  }
  async run(model: Model, real: Real) {
    model.now += this.seconds;
    real.store.clock.advance(this.seconds);
    model.commands += 1;
    await checkInvariants(model, real);
  }
  toString() {
    return `advanceClock(${this.seconds}s)`;
  }
}

class Cleanup implements Cmd {
  constructor(readonly batchSize: number) {}
  check() {
    return true;
  }
  async run(model: Model, real: Real) {
    let expected = 0;
    for (const [intent, slot] of model.intents.entries()) {
      const row = slot.row;
      if (!row) continue;
      // SKIP LOCKED: a paused transaction's row is left alone.
      if (model.mode === 'transactional' && model.stalled.some((paused) => paused.intent === intent))
        continue;
      const liveLease = row.state === 'processing' && row.leaseUntil > model.now;
      if (row.expiresAt <= model.now && !liveLease) {
        slot.row = null;
        expected += 1;
      }
    }
    const { deleted } = await cleanupExpiredKeys(real.store, { batchSize: this.batchSize });
    model.commands += 1;
    if (deleted !== expected) throw new Error(`cleanup deleted ${deleted}, model says ${expected}`);
    await checkInvariants(model, real);
  }
  toString() {
    return `cleanup(batch ${this.batchSize})`;
  }
}

const outcome = fc.constantFrom<Outcome>('ok', 'ok', 'declined', 'transient');

export function commandsArbitrary(options: ResolvedOptions): fc.Arbitrary<Iterable<Cmd>> {
  const lease = options.leaseSeconds;
  const retention = options.retentionSeconds;
  return fc.commands(
    [
      outcome.map((o) => new Send(o)),
      fc.tuple(fc.nat(), outcome).map(([target, o]) => new Retry(target, o)),
      fc
        .tuple(
          fc.oneof(fc.constant<'new'>('new'), fc.nat()),
          fc.constantFrom<CrashPoint>('afterClaim', 'afterEffect', 'afterComplete'),
        )
        .map(([target, point]) => new Crash(target, point)),
      fc.oneof(fc.constant<'new'>('new'), fc.nat()).map((target) => new Stall(target)),
      fc.nat().map((pick) => new Resume(pick)),
      fc
        .constantFrom(1, lease - 1, lease, lease + 1, retention - 1, retention, retention + 1, 10 * retention)
        .map((seconds) => new AdvanceClock(seconds)),
      fc.integer({ min: 1, max: 3 }).map((size) => new Cleanup(size)),
    ],
    { maxCommands: 40, size: 'medium' },
  );
}

export function newModel(mode: Mode, options: ResolvedOptions): Model {
  return {
    mode,
    options,
    now: 0,
    intents: [],
    charges: 0,
    inDoubtCharges: 0,
    successfulCompletions: 0,
    stalled: [],
    nextRun: 0,
    commands: 0,
    seen: {},
  };
}
