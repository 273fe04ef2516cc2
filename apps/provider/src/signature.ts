/**
 * Webhook signatures: Stripe's `Stripe-Signature` scheme under the name `Idem-Signature`.
 *
 *   Idem-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
 *
 * The timestamp is part of the signed string, so a captured delivery cannot be replayed with a fresh `t`; the
 * receiver rejects old timestamps (tolerance) to bound replays of the unmodified header.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'Idem-Signature';

export const DEFAULT_WEBHOOK_SECRET = 'whsec_test_idem';

/** Stripe's default: a signature older (or, here, newer) than this is rejected. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export type WebhookBody = string | Uint8Array;

function hmacHex(secret: string, body: WebhookBody, timestamp: number): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
}

/**
 * The `Idem-Signature` header value for `body` (the exact raw bytes that are POSTed) signed at `timestamp`
 * (unix seconds, default now). Tests of a receiver use it to forge valid or deliberately wrong deliveries.
 */
export function signWebhookPayload(
  secret: string,
  body: WebhookBody,
  timestamp: number = Math.floor(Date.now() / 1000),
): string {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new TypeError('timestamp must be a non-negative integer number of unix seconds');
  }
  return `t=${timestamp},v1=${hmacHex(secret, body, timestamp)}`;
}

export interface VerifyOptions {
  /** Maximum |now − t| in seconds; default 300. `Infinity` disables the check. */
  toleranceSeconds?: number;
  /** The current time in unix seconds (default: the clock); for tests. */
  now?: number;
}

const HEX_SHA256 = /^[0-9a-f]{64}$/;

/**
 * Reference verification, as a receiver should do it: on the RAW body (not re-serialized JSON), constant-time
 * comparison, any of several `v1=` entries may match (secret rotation), other schemes (`v0=`) are ignored, and
 * the timestamp must be within the tolerance. Returns false for anything malformed; never throws.
 */
export function verifyWebhookSignature(
  header: string | null | undefined,
  body: WebhookBody,
  secret: string,
  { toleranceSeconds = DEFAULT_TOLERANCE_SECONDS, now = Date.now() / 1000 }: VerifyOptions = {},
): boolean {
  if (typeof header !== 'string' || header.length > 8192) return false;
  let timestamp: number | undefined;
  const candidates: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === 't') {
      if (timestamp !== undefined || !/^\d{1,12}$/.test(value)) return false; // one well-formed t only
      timestamp = Number(value);
    } else if (name === 'v1') {
      candidates.push(value.toLowerCase());
    }
  }
  if (timestamp === undefined || candidates.length === 0) return false;
  if (!(Math.abs(now - timestamp) <= toleranceSeconds)) return false;

  const expected = Buffer.from(hmacHex(secret, body, timestamp), 'utf8');
  let matched = false;
  for (const candidate of candidates) {
    // Length and hex-ness are public (every valid signature is 64 hex chars); the content is compared in
    // constant time, and every candidate is checked so timing does not reveal which one matched.
    if (!HEX_SHA256.test(candidate)) continue;
    if (timingSafeEqual(Buffer.from(candidate, 'utf8'), expected)) matched = true;
  }
  return matched;
}
