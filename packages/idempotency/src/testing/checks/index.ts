/** Every conformance check, in the order the kit runs them: the status table first, then races and scope. */
import type { ConformanceCheck } from '../check.ts';
import { storedError, transientFailure } from './errors.ts';
import { fingerprint } from './fingerprint.ts';
import { concurrency, inFlight, inFlightCap } from './races.ts';
import {
  batched,
  invalidInput,
  malformedKey,
  missingKey,
  noPrincipal,
  unfingerprintableInput,
} from './rejections.ts';
import { scope } from './scope.ts';
import { canonicalInput, firstRequest, quotedKey, replay } from './success.ts';

export const conformanceChecks: readonly ConformanceCheck[] = [
  firstRequest,
  replay,
  canonicalInput,
  quotedKey,
  storedError,
  transientFailure,
  missingKey,
  malformedKey,
  noPrincipal,
  invalidInput,
  unfingerprintableInput,
  batched,
  fingerprint,
  inFlight,
  inFlightCap,
  concurrency,
  scope,
];
