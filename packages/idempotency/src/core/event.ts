/** What every adapter reports about one idempotent request (`onEvent`): for logs and metrics. */
import type { IdempotencyMode } from './config.ts';
import type { RequestOutcome } from './record.ts';

export interface IdempotencyEvent {
  /** The procedure path (tRPC) or the route's name (plain HTTP). */
  procedure: string;
  mode: IdempotencyMode;
  outcome: RequestOutcome;
  durationMs: number;
  /** The key itself never leaves the store: logs and metrics get its fingerprint. */
  keyHash: string | null;
}
