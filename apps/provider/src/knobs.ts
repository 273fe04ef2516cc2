/**
 * Test knobs: fault injection for the checkout app's tests (slow provider, provider 5xx, lost responses, and
 * misbehaving webhook deliveries). Kept in memory per process on purpose: they are armed by a test against the
 * process it started.
 */
import { z } from 'zod';
import { ChargeHold } from './charge-hold.ts';

export interface KnobState {
  /** Added before every POST /v1/charges response is written (after the charge has committed). */
  latencyMs: number;
  /** Every POST /v1/charges response waits (after the charge has committed) until POST /__charges/release. */
  chargeHold: boolean;
  /** The next N valid charge calls return 500 without charging or claiming their idempotency key. */
  failNext: number;
  /** The next N valid charge calls run (and commit) normally, then the socket is destroyed without a response. */
  dropResponseNext: number;
  /** Every webhook delivery is POSTed this many extra times, concurrently with the first. */
  webhookDuplicates: number;
  /** Deliveries are held (not sent) until POST /__webhooks/flush, which sends them and releases the hold. */
  webhookHold: boolean;
  /** The next N delivery attempts are not sent and count as failed (retried with backoff). */
  webhookFailNext: number;
}

const count = z.number().int().min(0).max(1_000_000).optional();

export const KnobUpdateSchema = z.strictObject({
  latencyMs: z.number().int().min(0).max(120_000).optional(),
  chargeHold: z.boolean().optional(),
  failNext: count,
  dropResponseNext: count,
  webhookDuplicates: z.number().int().min(0).max(100).optional(),
  webhookHold: z.boolean().optional(),
  webhookFailNext: count,
});

export type KnobUpdate = z.infer<typeof KnobUpdateSchema>;

const DEFAULTS: Omit<KnobState, 'chargeHold'> = {
  latencyMs: 0,
  failNext: 0,
  dropResponseNext: 0,
  webhookDuplicates: 0,
  webhookHold: false,
  webhookFailNext: 0,
};

export class Knobs {
  #state = { ...DEFAULTS };
  /** The chargeHold knob: a gate with waiters rather than a plain value. */
  readonly charges = new ChargeHold();

  snapshot(): KnobState {
    return { ...this.#state, chargeHold: this.charges.on };
  }

  /** Partial update: fields left out keep their current value. Turning chargeHold off releases what it held. */
  set(update: KnobUpdate): KnobState {
    const state = this.#state;
    if (update.chargeHold === true) this.charges.hold();
    if (update.chargeHold === false) this.charges.release();
    this.#state = {
      latencyMs: update.latencyMs ?? state.latencyMs,
      failNext: update.failNext ?? state.failNext,
      dropResponseNext: update.dropResponseNext ?? state.dropResponseNext,
      webhookDuplicates: update.webhookDuplicates ?? state.webhookDuplicates,
      webhookHold: update.webhookHold ?? state.webhookHold,
      webhookFailNext: update.webhookFailNext ?? state.webhookFailNext,
    };
    return this.snapshot();
  }

  /** Back to the defaults; held charge responses are released. */
  reset(): KnobState {
    this.#state = { ...DEFAULTS };
    this.charges.release();
    return this.snapshot();
  }

  get latencyMs(): number {
    return this.#state.latencyMs;
  }

  get webhookDuplicates(): number {
    return this.#state.webhookDuplicates;
  }

  get webhookHold(): boolean {
    return this.#state.webhookHold;
  }

  releaseWebhookHold(): void {
    this.#state.webhookHold = false;
  }

  /** Consumes one armed failure. Synchronous, so concurrent requests each take a distinct slot. */
  takeFailure(): boolean {
    if (this.#state.failNext <= 0) return false;
    this.#state.failNext -= 1;
    return true;
  }

  /** Consumes one armed dropped response. */
  takeDrop(): boolean {
    if (this.#state.dropResponseNext <= 0) return false;
    this.#state.dropResponseNext -= 1;
    return true;
  }

  /** Consumes one armed failed webhook delivery attempt. */
  takeWebhookFailure(): boolean {
    if (this.#state.webhookFailNext <= 0) return false;
    this.#state.webhookFailNext -= 1;
    return true;
  }
}
