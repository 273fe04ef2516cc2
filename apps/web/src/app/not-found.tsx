import Link from 'next/link';

export default function NotFound() {
  return (
    <div className="text-center">
      <h1 className="text-2xl font-semibold">Not found</h1>
      <p className="mt-2 text-stone-600">There is nothing here, or it belongs to someone else.</p>
      <Link href="/" className="mt-4 inline-block text-brand-700 underline">
        Back to the shop
      </Link>
    </div>
  );
}
