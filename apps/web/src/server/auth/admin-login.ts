/** Checks a pasted API token for the admin sign-in form. */
import { type Database, hashApiToken } from '@idem/db';

export type AdminTokenCheck =
  | { ok: true; apiTokenId: string; email: string }
  | { ok: false; reason: 'unknown_token' | 'not_admin'; email?: string };

export async function checkAdminToken(db: Database, token: string): Promise<AdminTokenCheck> {
  const trimmed = token.trim();
  if (trimmed.length === 0 || trimmed.length > 512) return { ok: false, reason: 'unknown_token' };
  const row = await db.apiToken.findUnique({
    where: { tokenHash: hashApiToken(trimmed) },
    include: { user: true },
  });
  if (!row) return { ok: false, reason: 'unknown_token' };
  if (row.user.role !== 'admin') return { ok: false, reason: 'not_admin', email: row.user.email };
  return { ok: true, apiTokenId: row.id, email: row.user.email };
}
