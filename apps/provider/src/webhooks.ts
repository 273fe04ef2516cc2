/**
 * Webhook delivery, at least once: a background loop drains the `provider.webhook_deliveries` outbox.
 *
 * Claiming: one UPDATE picks due rows with `FOR UPDATE SKIP LOCKED`, counts the attempt and pushes
 * `next_attempt_at` forward by a lease, then commits. So two provider processes (or the loop and a flush) never
 * hold the same row at once, and no connection is held while the HTTP request is in flight. If a process dies
 * mid-delivery, the lease runs out and another process (or this one, restarted) retries the row.
 *
 * At least once, not exactly once: a receiver that answered 2xx may still see the event again (the result was
 * not recorded before a crash, a lease ran out on a very slow receiver, or the test knob webhookDuplicates).
 * Receivers must dedupe on the event id.
 */
import http from 'node:http';
import https from 'node:https';
import type { Pool } from './db.ts';
import type { EventType } from './events.ts';
import type { Knobs } from './knobs.ts';
import { SIGNATURE_HEADER, signWebhookPayload } from './signature.ts';

/** How often the loop looks for due deliveries. */
export const POLL_INTERVAL_MS = 150;
/** Whole-request timeout of one POST (connect, send, response headers and body). */
export const DELIVERY_TIMEOUT_MS = 5_000;
/** After this many failed attempts the delivery is given up (failed_at set, logged). */
export const MAX_ATTEMPTS = 10;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 30_000;
/** Deliveries in flight per process; the pool (10) is shared with the API, and each delivery uses it briefly. */
const MAX_IN_FLIGHT = 8;
/** A claimed row is not due again before this; far longer than a delivery can take (5 s timeout). */
const LEASE_SECONDS = 60;
/** A flush sends at most this many held deliveries. */
const FLUSH_LIMIT = 1_000;

/** Delay before the next attempt after failed attempt number `attempt` (1-based): 0.5 s × 2^(attempt−1), ≤ 30 s. */
export function retryDelayMs(attempt: number): number {
  return Math.min(BACKOFF_BASE_MS * 2 ** (attempt - 1), BACKOFF_MAX_MS);
}

export interface WebhookConfig {
  url: string;
  secret: string;
}

export interface DeliveryResult {
  event: string;
  type: EventType;
  /** The attempt number this was (1-based). */
  attempt: number;
  delivered: boolean;
  /** The receiver's HTTP status; null when nothing was received (network error, timeout, simulated failure). */
  status: number | null;
  error: string | null;
}

interface ClaimedRow {
  event_id: string;
  event_seq: string; // bigint
  type: EventType;
  attempts: number;
  payload: string;
  traceparent: string | null;
}

const CLAIM_SQL = `
WITH due AS MATERIALIZED (
  SELECT event_id FROM provider.webhook_deliveries
   WHERE url = $1 AND delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
   ORDER BY next_attempt_at, event_seq
   LIMIT $2
   FOR UPDATE SKIP LOCKED
)
UPDATE provider.webhook_deliveries d
   SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => $3)
  FROM due, provider.events e
 WHERE d.event_id = due.event_id AND e.id = d.event_id
RETURNING d.event_id, d.event_seq, e.type, d.attempts, e.payload::text AS payload, e.traceparent`;

/** Postgres' SQLSTATE for a transaction rolled back to break a deadlock. */
const DEADLOCK_DETECTED = '40P01';

// A claim that will not be used (hold switched on meanwhile, or shutting down mid-flush): undo it.
const UNCLAIM_SQL = `
UPDATE provider.webhook_deliveries SET attempts = attempts - 1, next_attempt_at = now()
 WHERE event_id = ANY($1::text[]) AND delivered_at IS NULL AND failed_at IS NULL`;

const DELIVERED_SQL = `
UPDATE provider.webhook_deliveries
   SET delivered_at = now(), last_attempt_at = now(), last_status = $2, last_error = NULL
 WHERE event_id = $1 AND delivered_at IS NULL`;

// Guarded by the attempt number: if our lease had run out and another process re-claimed the row, that process
// now owns its schedule. $4 NULL = that was the last attempt: give up.
const FAILED_SQL = `
UPDATE provider.webhook_deliveries
   SET last_attempt_at = now(), last_status = $3, last_error = $5,
       next_attempt_at = CASE WHEN $4::double precision IS NULL THEN next_attempt_at
                              ELSE now() + make_interval(secs => $4::double precision) END,
       failed_at = CASE WHEN $4::double precision IS NULL THEN now() END
 WHERE event_id = $1 AND attempts = $2 AND delivered_at IS NULL AND failed_at IS NULL`;

export class WebhookDispatcher {
  readonly #pool: Pool;
  readonly #config: WebhookConfig;
  readonly #url: URL;
  readonly #knobs: Knobs | undefined;
  readonly #log: (line: string) => void;
  readonly #agent: http.Agent;
  readonly #inflight = new Set<Promise<unknown>>();
  #timer: NodeJS.Timeout | undefined;
  #tick: Promise<void> | undefined;
  #flushes = 0;
  #stopped = false;
  #loopFailing = false;
  #closed: Promise<void> | undefined;

  constructor(pool: Pool, config: WebhookConfig, knobs: Knobs | undefined, log: (line: string) => void) {
    this.#pool = pool;
    this.#config = config;
    this.#url = parseWebhookUrl(config.url);
    this.#knobs = knobs;
    this.#log = log;
    const Agent = this.#url.protocol === 'https:' ? https.Agent : http.Agent;
    this.#agent = new Agent({ keepAlive: true, maxSockets: MAX_IN_FLIGHT * 4 });
  }

  start(): void {
    this.#schedule(0);
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#tick = this.#poll().finally(() => {
        this.#tick = undefined;
        this.#schedule(POLL_INTERVAL_MS);
      });
    }, delayMs);
    // The loop alone never keeps the process alive; the HTTP server (or the test) does.
    this.#timer.unref();
  }

  async #poll(): Promise<void> {
    if (this.#held()) return;
    const free = MAX_IN_FLIGHT - this.#inflight.size;
    if (free <= 0) return;
    let rows: ClaimedRow[];
    try {
      rows = await this.#claim(free);
      if (this.#loopFailing) this.#log('provider: webhook loop: database reachable again');
      this.#loopFailing = false;
    } catch (err) {
      // A deadlock victim (Postgres chose this claim to break a cycle with another transaction on the same rows)
      // is not an outage: nothing was claimed, and the next poll claims again.
      if ((err as { code?: unknown }).code === DEADLOCK_DETECTED) return;
      // Logged once per outage, not every 150 ms.
      if (!this.#loopFailing) this.#log(`provider: webhook loop: cannot claim deliveries: ${describe(err)}`);
      this.#loopFailing = true;
      return;
    }
    if (rows.length === 0) return;
    if (this.#held() || this.#stopped) {
      // The hold was switched on (or close() called) while the claim was running: these stay held.
      await this.#unclaim(rows);
      return;
    }
    for (const row of rows) this.#track(this.#deliver(row));
  }

  #held(): boolean {
    return this.#flushes > 0 || (this.#knobs?.webhookHold ?? false);
  }

  #track(promise: Promise<unknown>): void {
    this.#inflight.add(promise);
    void promise.finally(() => this.#inflight.delete(promise)).catch(() => undefined);
  }

  async #claim(limit: number): Promise<ClaimedRow[]> {
    const result = await this.#pool.query<ClaimedRow>(CLAIM_SQL, [this.#config.url, limit, LEASE_SECONDS]);
    return result.rows.sort((a, b) => Number(BigInt(a.event_seq) - BigInt(b.event_seq)));
  }

  async #unclaim(rows: readonly ClaimedRow[]): Promise<void> {
    if (rows.length === 0) return;
    try {
      await this.#pool.query(UNCLAIM_SQL, [rows.map((row) => row.event_id)]);
    } catch (err) {
      // The lease runs out and the rows are retried anyway.
      this.#log(`provider: webhook loop: cannot release claimed deliveries: ${describe(err)}`);
    }
  }

  /** One attempt (plus test duplicates) and its recorded outcome. Never rejects. */
  async #deliver(row: ClaimedRow): Promise<DeliveryResult> {
    const base = { event: row.event_id, type: row.type, attempt: row.attempts };
    let result: DeliveryResult;
    if (this.#knobs?.takeWebhookFailure()) {
      result = {
        ...base,
        delivered: false,
        status: null,
        error: 'simulated failure (test knob webhookFailNext)',
      };
    } else {
      const headers = {
        'Content-Type': 'application/json',
        'User-Agent': 'idem-provider-webhooks/1',
        [SIGNATURE_HEADER]: signWebhookPayload(this.#config.secret, row.payload),
        ...(row.traceparent ? { traceparent: row.traceparent } : {}),
      };
      const copies = 1 + (this.#knobs?.webhookDuplicates ?? 0);
      // Extra copies are the same bytes and the same signature, sent concurrently; only the first one's answer
      // decides the outcome.
      const [first] = await Promise.allSettled(
        Array.from({ length: copies }, () => this.#post(row.payload, headers)),
      );
      if (first?.status === 'fulfilled') {
        const status = first.value;
        const ok = status >= 200 && status < 300;
        result = { ...base, delivered: ok, status, error: ok ? null : `HTTP ${status}` };
      } else {
        result = { ...base, delivered: false, status: null, error: describe(first?.reason, false) };
      }
    }
    await this.#record(result);
    return result;
  }

  async #record(result: DeliveryResult): Promise<void> {
    try {
      if (result.delivered) {
        await this.#pool.query(DELIVERED_SQL, [result.event, result.status]);
        return;
      }
      const giveUp = result.attempt >= MAX_ATTEMPTS;
      const update = await this.#pool.query(FAILED_SQL, [
        result.event,
        result.attempt,
        result.status,
        giveUp ? null : retryDelayMs(result.attempt) / 1000,
        result.error?.slice(0, 1000) ?? null,
      ]);
      if (giveUp && update.rowCount === 1) {
        this.#log(
          `provider: webhook ${result.event} to ${this.#config.url} given up after ${result.attempt} attempts (last: ${result.error ?? 'unknown'})`,
        );
      }
    } catch (err) {
      // Not recorded: the lease runs out and the event is delivered again (at least once).
      this.#log(`provider: webhook ${result.event}: cannot record the delivery outcome: ${describe(err)}`);
    }
  }

  #post(body: string, headers: Record<string, string>): Promise<number> {
    const client = this.#url.protocol === 'https:' ? https : http;
    return new Promise<number>((resolve, reject) => {
      let settled = false;
      const settle = (fn: () => void): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        fn();
      };
      const req = client.request(
        this.#url,
        {
          method: 'POST',
          agent: this.#agent,
          headers: { ...headers, 'Content-Length': Buffer.byteLength(body) },
        },
        (res) => {
          const status = res.statusCode ?? 0;
          res.on('error', (err) => settle(() => reject(err)));
          res.on('end', () => settle(() => resolve(status)));
          res.on('close', () =>
            settle(() => reject(new Error('connection closed before the response ended'))),
          );
          res.resume(); // The body is not used, but it is read, so the socket can be reused.
        },
      );
      const timer = setTimeout(
        () => req.destroy(new Error(`timed out after ${DELIVERY_TIMEOUT_MS} ms`)),
        DELIVERY_TIMEOUT_MS,
      );
      req.on('error', (err) => settle(() => reject(err)));
      req.end(body);
    });
  }

  /**
   * Test knob: sends every due (held) delivery one after another, each awaited before the next, in event order
   * or reversed, then releases the hold. Each send is a normal attempt (failures are retried by the loop).
   */
  async flush(order: 'forward' | 'reverse'): Promise<DeliveryResult[]> {
    this.#flushes += 1;
    const run = (async () => {
      try {
        // A poll that started before this flush either dispatched its rows already or gives them back now that a
        // flush is running; wait for it, so the claim below sees every held row.
        await this.#tick;
        const rows = await this.#claim(FLUSH_LIMIT);
        if (order === 'reverse') rows.reverse();
        const results: DeliveryResult[] = [];
        for (const [index, row] of rows.entries()) {
          if (this.#stopped) {
            await this.#unclaim(rows.slice(index));
            break;
          }
          results.push(await this.#deliver(row));
        }
        return results;
      } finally {
        this.#flushes -= 1;
        this.#knobs?.releaseWebhookHold();
      }
    })();
    this.#track(run);
    return run;
  }

  /** Stops polling, waits for the deliveries in flight (each bounded by the 5 s timeout) to be recorded. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#stopped = true;
      clearTimeout(this.#timer);
      await this.#tick;
      await Promise.allSettled([...this.#inflight]);
      this.#agent.destroy();
    })();
    return this.#closed;
  }
}

/** Only absolute http(s) URLs; throws a one-line error otherwise. */
export function parseWebhookUrl(value: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`webhook URL is not a valid URL: ${value}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Error(`webhook URL must be http:// or https://: ${value}`);
  }
  return url;
}

function describe(err: unknown, stack = true): string {
  if (!(err instanceof Error)) return String(err);
  // Connection errors to "localhost" are an AggregateError with an empty message.
  const inner = err instanceof AggregateError && err.errors[0] instanceof Error ? err.errors[0] : err;
  const code = (inner as { code?: unknown }).code;
  const message = inner.message || (typeof code === 'string' ? code : inner.name);
  return stack ? (err.stack ?? message) : message;
}
