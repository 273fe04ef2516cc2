'use server';

import { cookies } from 'next/headers';
import { redirect } from 'next/navigation';
import { env } from '~/env';
import { checkAdminToken } from '~/server/auth/admin-login';
import {
  ADMIN_SESSION_COOKIE,
  ADMIN_SESSION_MAX_AGE_SECONDS,
  signAdminSession,
} from '~/server/auth/admin-session';
import { db } from '~/server/db';

export interface SignInState {
  error: string | null;
}

/**
 * /admin/login: the admin pastes an API token once; the browser then holds an httpOnly session cookie that
 * names the token (never the token itself). Server actions only accept same-origin posts (Next checks Origin).
 */
export async function signIn(_previous: SignInState, form: FormData): Promise<SignInState> {
  const token = form.get('token');
  const check = await checkAdminToken(db, typeof token === 'string' ? token : '');
  if (!check.ok) {
    return {
      error:
        check.reason === 'not_admin'
          ? `That token belongs to ${check.email}, who is not an admin.`
          : 'That is not an API token this shop issued.',
    };
  }
  (await cookies()).set(ADMIN_SESSION_COOKIE, await signAdminSession(check.apiTokenId, env.SESSION_SECRET), {
    httpOnly: true,
    // lax: sent on top-level navigations to /admin, never on cross-site POSTs (tRPC mutations are POSTs).
    sameSite: 'lax',
    secure: env.COOKIE_SECURE,
    path: '/',
    maxAge: ADMIN_SESSION_MAX_AGE_SECONDS,
  });
  redirect('/admin');
}

export async function signOut(): Promise<void> {
  (await cookies()).delete(ADMIN_SESSION_COOKIE);
  redirect('/admin/login');
}
