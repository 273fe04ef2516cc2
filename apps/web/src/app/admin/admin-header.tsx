import Link from 'next/link';
import { signOut } from './actions';

/** The admin pages' header: who is signed in, where the raw metrics are, sign out. */
export function AdminHeader({ email, title }: { email: string; title: string }) {
  return (
    <header className="mb-8 flex flex-wrap items-end justify-between gap-4 border-b border-stone-200 pb-4">
      <div>
        <p className="text-xs font-semibold uppercase tracking-wide text-brand-700">
          <Link href="/admin">Idempotency admin</Link>
        </p>
        <h1 className="mt-1 text-2xl font-semibold">{title}</h1>
      </div>
      <div className="flex items-center gap-4 text-sm text-stone-600">
        <a href="/api/metrics" className="underline hover:text-stone-900">
          /api/metrics
        </a>
        <span data-testid="admin-email">{email}</span>
        <form action={signOut}>
          <button type="submit" className="rounded-full border border-stone-300 px-3 py-1 hover:bg-stone-100">
            Sign out
          </button>
        </form>
      </div>
    </header>
  );
}
