/**
 * Gives every browser a guest session before any page or API route runs, so server components and tRPC
 * see the same principal on the very first request.
 */
import { type NextRequest, NextResponse } from 'next/server';
import { env } from '~/env';
import {
  SESSION_COOKIE,
  SESSION_MAX_AGE_SECONDS,
  signGuestSession,
  verifyGuestSession,
} from '~/server/auth/session';

export async function proxy(request: NextRequest) {
  // API clients authenticate with a bearer token and need no cookie.
  if (request.headers.has('authorization')) return NextResponse.next();
  const current = request.cookies.get(SESSION_COOKIE)?.value;
  if (await verifyGuestSession(current, env.SESSION_SECRET)) return NextResponse.next();

  const token = await signGuestSession(crypto.randomUUID(), env.SESSION_SECRET);
  // Forward the new cookie to this request's handlers too, then set it on the browser.
  request.cookies.set(SESSION_COOKIE, token);
  const response = NextResponse.next({ request: { headers: request.headers } });
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
