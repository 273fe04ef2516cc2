import Link from 'next/link';

/** 401: rendered by unauthorized() — no session at all, or an API token we did not issue. */
export default function Unauthorized() {
  return (
    <div className="mx-auto max-w-lg text-center" data-testid="unauthorized">
      <p className="font-mono text-sm text-stone-500">401</p>
      <h1 className="mt-1 text-2xl font-semibold">Sign in first</h1>
      <p className="mt-2 text-stone-600">There is no valid session or API token on this request.</p>
      <Link href="/admin/login" className="mt-6 inline-block text-sm text-brand-700 underline">
        Sign in with an admin token
      </Link>
    </div>
  );
}
