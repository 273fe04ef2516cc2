/**
 * Which checks must pass under each profile. A check outside the profile's list still runs and is reported, as
 * advice: it never fails the run.
 */
import { ConformanceCheckId } from '@idem/idempotency/testing';

/** The checks this command adds to the kit's: the shape of the error responses (draft-07 §2.7). */
export const HttpCheckId = {
  problemDetails: 'problem-details',
  docsLink: 'docs-link',
} as const;
export type HttpCheckId = (typeof HttpCheckId)[keyof typeof HttpCheckId];

export type CheckId = ConformanceCheckId | HttpCheckId;

interface Profile {
  summary: string;
  /** The checks that must pass; `all` is every check but the advisory ones listed. */
  required: readonly CheckId[] | { all: true; except: readonly CheckId[] };
}

export const PROFILES = {
  idem: {
    summary: "Idem's own contract: every check that applies (the documentation link is advice)",
    required: { all: true, except: [HttpCheckId.docsLink] },
  },
  'draft-07': {
    summary:
      'draft-ietf-httpapi-idempotency-key-header-07: the key header, replay, 400 / 409 / 422 and their problem details',
    required: [
      ConformanceCheckId.firstRequest,
      ConformanceCheckId.replay,
      ConformanceCheckId.quotedKey,
      ConformanceCheckId.missingKey,
      ConformanceCheckId.malformedKey,
      ConformanceCheckId.fingerprint,
      ConformanceCheckId.inFlight,
      ConformanceCheckId.concurrency,
      HttpCheckId.problemDetails,
    ],
  },
  stripe: {
    summary:
      "Stripe's behaviour: one execution per key and principal, replays, stored business errors, retried failures (a reused key may answer 400, not 422)",
    required: [
      ConformanceCheckId.firstRequest,
      ConformanceCheckId.replay,
      ConformanceCheckId.concurrency,
      ConformanceCheckId.scope,
      ConformanceCheckId.storedError,
      ConformanceCheckId.transientFailure,
    ],
  },
} as const satisfies Record<string, Profile>;
export type ProfileName = keyof typeof PROFILES;

export function isRequired(profile: ProfileName, id: CheckId): boolean {
  const required: Profile['required'] = PROFILES[profile].required;
  return 'all' in required ? !required.except.includes(id) : required.includes(id);
}
