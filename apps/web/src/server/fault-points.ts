/**
 * TEST-ONLY fault points for the multi-process fault suite (tests/faults): SIGKILL this very process at one of
 * the idempotency lifecycle's crash-sensitive moments. Wired only by the test build of the router
 * (test-seams.ts), from the IDEM_FAULT_* variables env.ts parses; the app's own router has no fault hooks.
 */
import 'server-only';
import { existsSync, writeFileSync } from 'node:fs';
import type { FaultHooks } from '@idem/idempotency/trpc';

export const FAULT_POINTS = ['after-claim', 'before-complete', 'after-complete'] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

export interface FaultPointSettings {
  point: FaultPoint;
  /** Fire once across restarts: the marker file is written just before the kill; an existing one disarms. */
  onceFile: string | null;
  /** The probability that a hit fires. */
  rate: number;
}

function killAt({ point, onceFile, rate }: FaultPointSettings): () => void {
  return () => {
    if (onceFile && existsSync(onceFile)) return;
    if (rate < 1 && Math.random() >= rate) return;
    if (onceFile) writeFileSync(onceFile, `${point} ${process.pid}\n`);
    process.kill(process.pid, 'SIGKILL');
  };
}

/** The library's fault hooks that SIGKILL this process at `settings.point`. */
export function faultHooksFor(settings: FaultPointSettings): FaultHooks {
  const fire = killAt(settings);
  switch (settings.point) {
    case 'after-claim':
      return { afterClaim: fire };
    case 'before-complete':
      return { beforeComplete: fire };
    case 'after-complete':
      return { afterComplete: fire };
  }
}
