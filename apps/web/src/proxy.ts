/**
 * Gives every browser a guest session before any page or API route runs, so server components and tRPC
 * see the same principal on the very first request. A request whose session is minted here is marked
 * (`GUEST_MINTED_HEADER`) so that idempotent mutations can refuse it: its retry would be another guest.
 */
import { type NextRequest, NextResponse } from 'next/server';
import { env } from '~/env';
import {
  GUEST_MINTED_HEADER,
  SESSION_COOKIE,
  SESSION_MAX_AGE_SECONDS,
  signGuestSession,
  verifyGuestSession,
} from '~/server/auth/session';

export async function proxy(request: NextRequest) {
  // Only this proxy may say that a session was minted for the request: drop whatever the client sent.
  const forwarded = new Headers(request.headers);
  forwarded.delete(GUEST_MINTED_HEADER);
  // API clients authenticate with a bearer token and need no cookie.
  if (request.headers.has('authorization')) return NextResponse.next({ request: { headers: forwarded } });
  const current = request.cookies.get(SESSION_COOKIE)?.value;
  if (await verifyGuestSession(current, env.SESSION_SECRET))
    return NextResponse.next({ request: { headers: forwarded } });

  const guestId = crypto.randomUUID();
  const token = await signGuestSession(guestId, env.SESSION_SECRET);
  // Forward the new cookie to this request's handlers too, then set it on the browser.
  request.cookies.set(SESSION_COOKIE, token);
  forwarded.set('cookie', request.headers.get('cookie') ?? '');
  forwarded.set(GUEST_MINTED_HEADER, guestId);
  const response = NextResponse.next({ request: { headers: forwarded } });
  response.cookies.set(SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: 'lax',
    secure: env.COOKIE_SECURE,
    path: '/',
    maxAge: SESSION_MAX_AGE_SECONDS,
  });
  return response;
}

export const config = {
  matcher: ['/((?!_next/static|_next/image|favicon.ico|api/health).*)'],
};
