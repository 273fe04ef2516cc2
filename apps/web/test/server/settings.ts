/**
 * What the test server (main.ts) serves, from its environment: the fault point to die at and the controls of the
 * fault suite's control runs. Only this entry point reads these variables; the app's own env (src/env.ts) does
 * not know them, so no deployment of the app can be armed with them.
 */
import { z } from 'zod';
import { FAULT_POINTS } from './fault-points.ts';

const flag = z.enum(['0', '1']).transform((value) => value === '1');

const testServerEnv = z.object({
  /** SIGKILL this process at one point of a key's lifecycle. */
  IDEM_FAULT_POINT: z.enum(FAULT_POINTS).optional(),
  /** Fire the fault point once across restarts (a marker file written just before the kill). */
  IDEM_FAULT_ONCE: z.string().min(1).optional(),
  /** The probability that a fault point's hit fires (default 1; the soak uses less). */
  IDEM_FAULT_RATE: z.coerce.number().min(0).max(1).default(1),
  /** The external-mode lease of every procedure (default: the library's). */
  IDEM_LEASE_SECONDS: z.coerce.number().positive().optional(),
  /** CONTROL: a fresh order id (so a fresh provider key) per attempt instead of one per intent. */
  IDEM_TEST_EFFECT_ID_PER_ATTEMPT: flag.default(false),
  /** CONTROL: the owner of a key does not renew its lease while the procedure runs. */
  IDEM_TEST_NO_LEASE_RENEWAL: flag.default(false),
});

export function parseTestServerSettings(source: Readonly<Record<string, string | undefined>>) {
  const parsed = testServerEnv.parse(source);
  return {
    faultPoint: parsed.IDEM_FAULT_POINT ?? null,
    faultOnceFile: parsed.IDEM_FAULT_ONCE ?? null,
    faultRate: parsed.IDEM_FAULT_RATE,
    leaseSeconds: parsed.IDEM_LEASE_SECONDS ?? null,
    effectIdPerAttempt: parsed.IDEM_TEST_EFFECT_ID_PER_ATTEMPT,
    noLeaseRenewal: parsed.IDEM_TEST_NO_LEASE_RENEWAL,
  };
}

export type TestServerSettings = ReturnType<typeof parseTestServerSettings>;
