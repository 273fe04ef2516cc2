/**
 * The `chargeHold` knob's gate. While it is on, every POST /v1/charges response waits here — after its charge has
 * committed — until the test releases it. A test that needs a payment to stay in flight holds it for exactly as
 * long as it needs, and learns that the charge has arrived from `whenHeld`, instead of betting that a latency
 * outlasts whatever it does meanwhile (a bet a loaded machine loses).
 */
export class ChargeHold {
  #on = false;
  #held = 0;
  #opened: Promise<void>;
  #open: () => void = () => {};
  #waiters = new Set<{ atLeast: number; reached: () => void }>();

  constructor() {
    this.#opened = this.#newGate();
  }

  get on(): boolean {
    return this.#on;
  }

  /** Responses waiting for release now. */
  get held(): number {
    return this.#held;
  }

  hold(): void {
    this.#on = true;
  }

  /** Resolves at once when the hold is off; otherwise when `release()` is called. */
  async pass(): Promise<void> {
    if (!this.#on) return;
    const opened = this.#opened;
    this.#held += 1;
    for (const waiter of this.#waiters) if (this.#held >= waiter.atLeast) waiter.reached();
    try {
      await opened;
    } finally {
      this.#held -= 1;
    }
  }

  /** Lets every held response go and turns the hold off; returns how many were waiting. */
  release(): number {
    const released = this.#held;
    this.#on = false;
    this.#open();
    this.#opened = this.#newGate();
    return released;
  }

  /** Resolves true once at least `atLeast` responses are held, false if `timeoutMs` passes first. */
  async whenHeld(atLeast: number, timeoutMs: number): Promise<boolean> {
    if (this.#held >= atLeast) return true;
    let waiter: { atLeast: number; reached: () => void } | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await new Promise<boolean>((resolve) => {
        waiter = { atLeast, reached: () => resolve(true) };
        this.#waiters.add(waiter);
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
    } finally {
      clearTimeout(timer);
      if (waiter !== undefined) this.#waiters.delete(waiter);
    }
  }

  #newGate(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#open = resolve;
    });
  }
}
