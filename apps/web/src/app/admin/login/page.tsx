import type { Metadata } from 'next';
import Link from 'next/link';
import { isAdmin } from '~/server/auth/principal';
import { getRequestPrincipal } from '~/server/request-principal';
import { AdminLoginForm } from './login-form';

export const dynamic = 'force-dynamic';
export const metadata: Metadata = { title: 'Admin sign-in' };

export default async function AdminLoginPage() {
  const principal = await getRequestPrincipal();
  return (
    <section className="mx-auto max-w-md rounded-2xl border border-stone-200 bg-white p-8">
      <h1 className="text-2xl font-semibold">Admin sign-in</h1>
      {isAdmin(principal) ? (
        <p className="mt-4 text-stone-600">
          You are signed in as {principal.email}.{' '}
          <Link href="/admin" className="text-brand-700 underline">
            Open the dashboard
          </Link>
        </p>
      ) : (
        <>
          <p className="mt-2 text-sm text-stone-600">
            Paste an API token of an admin user. The browser keeps an httpOnly session for 8 hours; the token
            itself is not stored. The demo admin&apos;s token is printed by <code>pnpm seed</code> and{' '}
            <code>pnpm dev</code>.
          </p>
          <AdminLoginForm />
        </>
      )}
    </section>
  );
}
