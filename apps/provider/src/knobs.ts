/**
 * Test knobs: fault injection for the checkout app's tests (slow provider, provider 5xx, lost responses).
 * Kept in memory per process on purpose: they are armed by a test against the process it started.
 */
import { z } from 'zod';

export interface KnobState {
  /** Added before every POST /v1/charges response is written (after the charge has committed). */
  latencyMs: number;
  /** The next N valid charge calls return 500 without charging or claiming their idempotency key. */
  failNext: number;
  /** The next N valid charge calls run (and commit) normally, then the socket is destroyed without a response. */
  dropResponseNext: number;
}

export const KnobUpdateSchema = z.strictObject({
  latencyMs: z.number().int().min(0).max(120_000).optional(),
  failNext: z.number().int().min(0).max(1_000_000).optional(),
  dropResponseNext: z.number().int().min(0).max(1_000_000).optional(),
});

export type KnobUpdate = z.infer<typeof KnobUpdateSchema>;

const DEFAULTS: KnobState = { latencyMs: 0, failNext: 0, dropResponseNext: 0 };

export class Knobs {
  #state: KnobState = { ...DEFAULTS };

  snapshot(): KnobState {
    return { ...this.#state };
  }

  /** Partial update: fields left out keep their current value. */
  set(update: KnobUpdate): KnobState {
    this.#state = {
      latencyMs: update.latencyMs ?? this.#state.latencyMs,
      failNext: update.failNext ?? this.#state.failNext,
      dropResponseNext: update.dropResponseNext ?? this.#state.dropResponseNext,
    };
    return this.snapshot();
  }

  reset(): KnobState {
    this.#state = { ...DEFAULTS };
    return this.snapshot();
  }

  get latencyMs(): number {
    return this.#state.latencyMs;
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
}
