import 'server-only';
import { headers } from 'next/headers';
import { env } from '~/env';
import { resolvePrincipal } from './auth/principal.ts';
import { db } from './db.ts';

/** The principal of the page being rendered (server components); same rules as the tRPC context. */
export async function getRequestPrincipal() {
  return resolvePrincipal(await headers(), { db, sessionSecret: env.SESSION_SECRET }).catch(() => null);
}
