/**
 * TEST-ONLY fault points for the multi-process fault suite (tests/faults): SIGKILL this very process at one of
 * the idempotency lifecycle's crash-sensitive moments. Armed ONLY by the environment the process was started
 * with, read once here at startup — never by anything in a request:
 *
 *   IDEM_TEST_HOOKS=1                 required; without it nothing below is read and every hook is absent
 *   IDEM_FAULT_POINT=after-claim | before-complete | after-complete
 *   IDEM_FAULT_ONCE=<file>            fire once across restarts: the marker file is written just before the
 *                                     kill, and a point whose marker exists never fires. Unset: every time.
 *   IDEM_FAULT_RATE=<0..1>            probability that a hit fires (default 1; the soak uses less)
 *   IDEM_LEASE_SECONDS=<n>            external-mode lease for every procedure (default: the library's 30 s)
 *   IDEM_TEST_EFFECT_ID_PER_ATTEMPT=1 CONTROL runs only: name each attempt's order (and provider key) with a
 *                                     fresh UUID instead of deriving it from the intent, i.e. protection off
 *   IDEM_TEST_NO_LEASE_RENEWAL=1      CONTROL runs only: the owner does not renew its lease while running
 *
 * In production (IDEM_TEST_HOOKS unset or 0) `faultHooks` is undefined and the library skips every call.
 */
import 'server-only';
import { existsSync, writeFileSync } from 'node:fs';
import type { FaultHooks } from '@idem/idempotency/trpc';
import { env } from '~/env';

export const FAULT_POINTS = ['after-claim', 'before-complete', 'after-complete'] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

interface FaultSettings {
  point: FaultPoint | null;
  onceFile: string | null;
  rate: number;
  leaseSeconds: number | null;
  effectIdPerAttempt: boolean;
  noLeaseRenewal: boolean;
}

function readSettings(source: NodeJS.ProcessEnv): FaultSettings | null {
  if (env.IDEM_TEST_HOOKS !== '1') return null;
  const point = source.IDEM_FAULT_POINT ?? '';
  if (point !== '' && !(FAULT_POINTS as readonly string[]).includes(point))
    throw new Error(`IDEM_FAULT_POINT must be one of ${FAULT_POINTS.join(', ')}, got "${point}"`);
  const rate = source.IDEM_FAULT_RATE ? Number(source.IDEM_FAULT_RATE) : 1;
  if (!(rate >= 0 && rate <= 1)) throw new Error(`IDEM_FAULT_RATE must be in [0, 1], got "${rate}"`);
  const lease = source.IDEM_LEASE_SECONDS ? Number(source.IDEM_LEASE_SECONDS) : null;
  if (lease !== null && !(Number.isFinite(lease) && lease > 0))
    throw new Error(`IDEM_LEASE_SECONDS must be a positive number, got "${source.IDEM_LEASE_SECONDS}"`);
  return {
    point: point === '' ? null : (point as FaultPoint),
    onceFile: source.IDEM_FAULT_ONCE || null,
    rate,
    leaseSeconds: lease,
    effectIdPerAttempt: source.IDEM_TEST_EFFECT_ID_PER_ATTEMPT === '1',
    noLeaseRenewal: source.IDEM_TEST_NO_LEASE_RENEWAL === '1',
  };
}

const settings = readSettings(process.env);

/** The lease override (test hooks only), or undefined for the library default. */
export const testLeaseSeconds: number | undefined = settings?.leaseSeconds ?? undefined;

/** CONTROL runs only: every attempt gets a fresh order id (no derivation from the key). */
export const effectIdPerAttempt: boolean = settings?.effectIdPerAttempt ?? false;

/** CONTROL runs only: the store without lease renewal (a slow owner is then taken over while running). */
export const leaseRenewalDisabled: boolean = settings?.noLeaseRenewal ?? false;

function killAt(point: FaultPoint, onceFile: string | null, rate: number): () => void {
  return () => {
    if (onceFile && existsSync(onceFile)) return;
    if (rate < 1 && Math.random() >= rate) return;
    if (onceFile) writeFileSync(onceFile, `${point} ${process.pid}\n`);
    process.kill(process.pid, 'SIGKILL');
  };
}

function buildHooks(current: FaultSettings | null): FaultHooks | undefined {
  if (!current?.point) return undefined;
  const fire = killAt(current.point, current.onceFile, current.rate);
  switch (current.point) {
    case 'after-claim':
      return { afterClaim: fire };
    case 'before-complete':
      return { beforeComplete: fire };
    case 'after-complete':
      return { afterComplete: fire };
  }
}

/** Passed to `createIdempotency`; undefined unless this process was started armed. */
export const faultHooks: FaultHooks | undefined = buildHooks(settings);
