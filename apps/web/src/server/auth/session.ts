/**
 * Guest sessions: every browser gets a signed, httpOnly cookie holding a random guest id. The signature
 * (HS256 via jose) means a client cannot pick someone else's id, so it is safe to scope orders and
 * idempotency keys by it.
 */
import { jwtVerify, SignJWT } from 'jose';

export const SESSION_COOKIE = 'idem_session';
export const SESSION_MAX_AGE_SECONDS = 60 * 60 * 24 * 365;

/**
 * Set by the proxy on a request it minted a guest session for (the value is that guest id), so the server
 * knows that this request's principal will not exist on a retry from a client that keeps no cookies. The proxy
 * strips any value a client sends.
 */
export const GUEST_MINTED_HEADER = 'x-idem-guest-minted';

const ISSUER = 'idem';

export async function signGuestSession(guestId: string, secret: string): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(guestId)
    .setIssuer(ISSUER)
    .setIssuedAt()
    .setExpirationTime(`${SESSION_MAX_AGE_SECONDS}s`)
    .sign(new TextEncoder().encode(secret));
}

/** The guest id inside a valid session cookie, or null for a missing, forged or expired one. */
export async function verifyGuestSession(token: string | undefined, secret: string): Promise<string | null> {
  if (!token) return null;
  try {
    const { payload } = await jwtVerify(token, new TextEncoder().encode(secret), {
      issuer: ISSUER,
      algorithms: ['HS256'],
    });
    return typeof payload.sub === 'string' && payload.sub.length > 0 ? payload.sub : null;
  } catch {
    return null;
  }
}
