/**
 * Who is calling. There is exactly one principal id per request, and it always comes from something the
 * server can verify (a signed cookie or a hashed API token), never from the request body.
 */
import { type Database, hashApiToken } from '@idem/db';
import { SESSION_COOKIE, verifyGuestSession } from './session.ts';

export type Principal =
  | { kind: 'user'; id: `user:${string}`; userId: string; email: string }
  | { kind: 'guest'; id: `guest:${string}`; guestId: string };

/** A bearer token was sent but is not one we issued: say so instead of silently downgrading to a guest. */
export class InvalidApiTokenError extends Error {
  override name = 'InvalidApiTokenError';
  constructor() {
    super('The API token in the Authorization header is not valid.');
  }
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
    return { kind: 'user', id: `user:${token.userId}`, userId: token.userId, email: token.user.email };
  }
  const guestId = await verifyGuestSession(readCookie(headers, SESSION_COOKIE), deps.sessionSecret);
  return guestId ? { kind: 'guest', id: `guest:${guestId}`, guestId } : null;
}

function readCookie(headers: Headers, name: string): string | undefined {
  const cookieHeader = headers.get('cookie');
  if (!cookieHeader) return undefined;
  for (const part of cookieHeader.split(';')) {
    const [rawName, ...rest] = part.trim().split('=');
    if (rawName === name) return decodeURIComponent(rest.join('='));
  }
  return undefined;
}
