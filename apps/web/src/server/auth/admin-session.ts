/**
 * Admin browser sessions. An admin pastes their API token once at /admin/login; the server checks it and sets
 * this httpOnly cookie: a signed JWT naming the API token (not the token itself), valid for 8 hours. Each
 * request re-reads the token row and its user, so deleting the token or taking the role away ends the session.
 *
 * The signing key is derived from SESSION_SECRET with its own label, and the audience differs from guest
 * sessions: a guest cookie can never be presented as an admin session, nor the other way round.
 */
import { createHash } from 'node:crypto';
import { jwtVerify, SignJWT } from 'jose';

export const ADMIN_SESSION_COOKIE = 'idem_admin';
export const ADMIN_SESSION_MAX_AGE_SECONDS = 8 * 60 * 60;

const ISSUER = 'idem';
const AUDIENCE = 'idem-admin';

function adminSigningKey(secret: string): Uint8Array {
  return createHash('sha256').update(`idem admin session\u0000${secret}`, 'utf8').digest();
}

export async function signAdminSession(apiTokenId: string, secret: string): Promise<string> {
  return new SignJWT({})
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(apiTokenId)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(`${ADMIN_SESSION_MAX_AGE_SECONDS}s`)
    .sign(adminSigningKey(secret));
}

/** The API token id inside a valid admin session cookie, or null (missing, forged, expired, a guest cookie). */
export async function verifyAdminSession(token: string | undefined, secret: string): Promise<string | null> {
  if (!token) return null;
  try {
    const { payload } = await jwtVerify(token, adminSigningKey(secret), {
      issuer: ISSUER,
      audience: AUDIENCE,
      algorithms: ['HS256'],
    });
    return typeof payload.sub === 'string' && payload.sub.length > 0 ? payload.sub : null;
  } catch {
    return null;
  }
}
