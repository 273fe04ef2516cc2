import type { Metadata } from 'next';
import { requireAdminPage } from '~/server/admin-page';
import { AdminHeader } from './admin-header';
import { AdminDashboard } from './dashboard';

export const dynamic = 'force-dynamic';
export const metadata: Metadata = { title: 'Admin' };

export default async function AdminPage({
  searchParams,
}: {
  searchParams: Promise<{ q?: string | string[] }>;
}) {
  const admin = await requireAdminPage();
  const { q } = await searchParams;
  return (
    <>
      <AdminHeader email={admin.email} title="Retries, duplicates and keys" />
      <AdminDashboard initialQuery={typeof q === 'string' ? q : ''} />
    </>
  );
}
