/**
 * Who is calling. There is exactly one principal id per request, and it always comes from something the
 * server can verify (a hashed API token, a signed admin session or a signed guest cookie), never from the
 * request body. Precedence: `Authorization: Bearer` → admin session cookie → guest session cookie.
 */
import { type Database, hashApiToken, type UserRole } from '@idem/db';
import { ADMIN_SESSION_COOKIE, verifyAdminSession } from './admin-session.ts';
import { GUEST_MINTED_HEADER, SESSION_COOKIE, verifyGuestSession } from './session.ts';

export type UserPrincipal = {
  kind: 'user';
  id: `user:${string}`;
  userId: string;
  email: string;
  role: UserRole;
};
export type GuestPrincipal = { kind: 'guest'; id: `guest:${string}`; guestId: string };
export type Principal = UserPrincipal | GuestPrincipal;
export type AdminPrincipal = UserPrincipal & { role: 'admin' };

export function isAdmin(principal: Principal | null | undefined): principal is AdminPrincipal {
  return principal?.kind === 'user' && principal.role === 'admin';
}

/** A bearer token was sent but is not one we issued: say so instead of silently downgrading to a guest. */
export class InvalidApiTokenError extends Error {
  override name = 'InvalidApiTokenError';
  constructor() {
    super('The API token in the Authorization header is not valid.');
  }
}

interface TokenWithUser {
  userId: string;
  user: { email: string; role: UserRole };
}

function userPrincipal(token: TokenWithUser): UserPrincipal {
  return {
    kind: 'user',
    id: `user:${token.userId}`,
    userId: token.userId,
    email: token.user.email,
    role: token.user.role,
  };
}

export async function resolvePrincipal(
  headers: Headers,
  deps: { db: Database; sessionSecret: string },
): Promise<Principal | null> {
  const authorization = headers.get('authorization');
  if (authorization) {
    const match = /^Bearer\s+(\S+)$/i.exec(authorization.trim());
    if (!match?.[1]) throw new InvalidApiTokenError();
    const token = await deps.db.apiToken.findUnique({
      where: { tokenHash: hashApiToken(match[1]) },
      include: { user: true },
    });
    if (!token) throw new InvalidApiTokenError();
    return userPrincipal(token);
  }
  const adminTokenId = await verifyAdminSession(
    readCookie(headers, ADMIN_SESSION_COOKIE),
    deps.sessionSecret,
  );
  if (adminTokenId) {
    // Checked on every request: a deleted token or a lost role ends the session (the browser is a guest again).
    const token = await deps.db.apiToken.findUnique({ where: { id: adminTokenId }, include: { user: true } });
    if (token && token.user.role === 'admin') return userPrincipal(token);
  }
  const guestId = await verifyGuestSession(readCookie(headers, SESSION_COOKIE), deps.sessionSecret);
  return guestId ? { kind: 'guest', id: `guest:${guestId}`, guestId } : null;
}

/** A cookie's value; a value that is not valid percent-encoding (`%E0%A4%A`) counts as absent. */
export function readCookie(headers: Headers, name: string): string | undefined {
  const cookieHeader = headers.get('cookie');
  if (!cookieHeader) return undefined;
  for (const part of cookieHeader.split(';')) {
    const [rawName, ...rest] = part.trim().split('=');
    if (rawName === name) {
      try {
        return decodeURIComponent(rest.join('='));
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/**
 * True when the proxy minted this request's guest session for it (`GUEST_MINTED_HEADER` names the very guest
 * the request resolved to): a client that keeps no cookies would be another guest on its retry.
 */
export function isMintedForThisRequest(principal: Principal | null, headers: Headers): boolean {
  return principal?.kind === 'guest' && headers.get(GUEST_MINTED_HEADER) === principal.guestId;
}
