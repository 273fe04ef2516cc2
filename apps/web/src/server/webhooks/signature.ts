/**
 * Verifies the provider's `Idem-Signature` header — Stripe's scheme: `t=<unix seconds>,v1=<hex HMAC-SHA256>`
 * over `<t>.<raw body>`, several `v1` entries allowed (secret rotation), and a tolerance window against replays.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'idem-signature';
export const DEFAULT_TOLERANCE_SECONDS = 300;

export type SignatureCheck = { ok: true } | { ok: false; reason: string };

export function verifySignature(
  header: string | null,
  rawBody: string,
  secret: string,
  { toleranceSeconds = DEFAULT_TOLERANCE_SECONDS, nowSeconds = Math.floor(Date.now() / 1000) } = {},
): SignatureCheck {
  if (!header) return { ok: false, reason: `missing ${SIGNATURE_HEADER} header` };
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const [name, value] = part.trim().split('=', 2);
    if (name === 't' && value && /^\d+$/.test(value)) timestamp = Number(value);
    if (name === 'v1' && value) signatures.push(value);
  }
  if (timestamp === undefined || signatures.length === 0)
    return { ok: false, reason: 'malformed signature header' };
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) {
    return { ok: false, reason: 'timestamp outside the tolerance window' };
  }
  const expected = createHmac('sha256', secret).update(`${timestamp}.${rawBody}`, 'utf8').digest();
  const matches = signatures.some((candidate) => {
    const given = Buffer.from(candidate, 'hex');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  return matches ? { ok: true } : { ok: false, reason: 'signature does not match' };
}
