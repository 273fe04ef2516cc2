import 'server-only';
import { headers } from 'next/headers';
import { forbidden, unauthorized } from 'next/navigation';
import { env } from '~/env';
import { type AdminPrincipal, InvalidApiTokenError, isAdmin, resolvePrincipal } from './auth/principal.ts';
import { db } from './db.ts';

/**
 * For /admin pages: the admin principal, or the request ends here — 401 (app/unauthorized.tsx) with no principal
 * or a bad bearer token, 403 (app/forbidden.tsx) for a guest or a customer. Same rule as adminProcedure.
 */
export async function requireAdminPage(): Promise<AdminPrincipal> {
  let principal: Awaited<ReturnType<typeof resolvePrincipal>>;
  try {
    principal = await resolvePrincipal(await headers(), { db, sessionSecret: env.SESSION_SECRET });
  } catch (error) {
    if (error instanceof InvalidApiTokenError) unauthorized();
    throw error;
  }
  if (!principal) unauthorized();
  if (!isAdmin(principal)) forbidden();
  return principal;
}
