import Link from 'next/link';

/** 403: rendered by forbidden() — e.g. /admin for anyone who is not an admin. */
export default function Forbidden() {
  return (
    <div className="mx-auto max-w-lg text-center" data-testid="forbidden">
      <p className="font-mono text-sm text-stone-500">403</p>
      <h1 className="mt-1 text-2xl font-semibold">Admins only</h1>
      <p className="mt-2 text-stone-600">
        You are signed in, but not as an admin: this page is for the people who run the shop.
      </p>
      <div className="mt-6 flex justify-center gap-6 text-sm">
        <Link href="/admin/login" className="text-brand-700 underline">
          Sign in with an admin token
        </Link>
        <Link href="/" className="text-brand-700 underline">
          Back to the shop
        </Link>
      </div>
    </div>
  );
}
