/**
 * Evicting an idempotency key: deleting its row so the next request with that key runs as new. The rule:
 *
 * - A key that is `processing` with an EXPIRED lease is stuck: its owner died mid-request. Evicting it is safe
 *   (a retry would take it over anyway; eviction just does it now and leaves a record).
 * - Any other key needs an explicit confirmation: a live lease means a request may still be running (a retry
 *   could then run beside it), and a completed key's stored answer would no longer be replayed — the next
 *   retry runs the procedure again. For checkout that is still one order and one charge (the order id and the
 *   provider key are derived from the key), but not every procedure is built that way.
 *
 * The check and the delete happen under the row's lock, against the version the admin looked at: a key that was
 * claimed, taken over or completed since then is refused. The audit row (who, when, which key, the row as it
 * was, which rule allowed it) is written in the same transaction as the delete.
 */
import type { Database, Prisma } from '@idem/db';
import { TRPCError } from '@trpc/server';
import type { KeyRef } from '~/lib/key-ref';
import type { AdminPrincipal } from '../auth/principal.ts';
import { EVICT_ACTION } from './key-trail.ts';

export type EvictionRule = 'lease_expired' | 'confirmed';
export const AdminErrorReason = {
  keyGone: 'key_gone',
  keyChanged: 'key_changed',
  notStuck: 'not_stuck',
} as const;
export type AdminErrorReason = (typeof AdminErrorReason)[keyof typeof AdminErrorReason];

export interface EvictRequest {
  ref: KeyRef;
  /** `version` of the KeyView the admin saw. */
  version: string;
  /** Required for a key that is not stuck (live lease, or completed). */
  confirmNotStuck: boolean;
}

export interface EvictResult {
  rule: EvictionRule;
  auditId: string;
  /** What the row was: processing (stuck or live) or completed. */
  previousState: string;
}

function adminError(
  code: 'NOT_FOUND' | 'CONFLICT' | 'PRECONDITION_FAILED',
  reason: AdminErrorReason,
  message: string,
) {
  // `cause.reason` becomes the response's data.reason (see errors.ts, reasonOf).
  return new TRPCError({ code, message, cause: Object.assign(new Error(message), { reason }) });
}

export async function evictKey(
  db: Database,
  admin: AdminPrincipal,
  request: EvictRequest,
): Promise<EvictResult> {
  const { ref } = request;
  return db.$transaction(async (tx) => {
    const rows = await tx.$queryRawUnsafe<
      Array<{ row: Prisma.JsonObject; state: string; stuck: boolean; version: string }>
    >(
      `select to_jsonb(k.*) as row, k.state,
              (k.state = 'processing' and k.locked_until <= now()) as stuck,
              left(md5(k.state || '|' || coalesce(k.lease_owner::text, '') || '|' || k.created_at::text || '|' || k.fingerprint), 16)
                as version
       from idempotency_keys k where k.scope = $1 and k.procedure = $2 and k.key = $3
       for update`,
      ref.scope,
      ref.procedure,
      ref.key,
    );
    const current = rows[0];
    if (!current) {
      throw adminError(
        'NOT_FOUND',
        'key_gone',
        'This key is gone already (evicted, cleaned up, or released).',
      );
    }
    if (current.version !== request.version) {
      throw adminError(
        'CONFLICT',
        'key_changed',
        'This key changed since you looked at it (claimed, taken over or completed). Review it again.',
      );
    }
    if (!current.stuck && !request.confirmNotStuck) {
      throw adminError(
        'PRECONDITION_FAILED',
        'not_stuck',
        current.state === 'completed'
          ? 'This key is completed: evicting it makes the next retry run the procedure again. Confirm explicitly.'
          : 'This key has a live lease: its request may still be running. Confirm explicitly.',
      );
    }
    const rule: EvictionRule = current.stuck ? 'lease_expired' : 'confirmed';
    await tx.$executeRawUnsafe(
      'delete from idempotency_keys where scope = $1 and procedure = $2 and key = $3',
      ref.scope,
      ref.procedure,
      ref.key,
    );
    const audit = await tx.adminAuditEvent.create({
      data: {
        actor: admin.id,
        actorEmail: admin.email,
        action: EVICT_ACTION,
        target: { scope: ref.scope, procedure: ref.procedure, key: ref.key },
        before: current.row,
        detail: { rule, state: current.state },
      },
      select: { id: true },
    });
    return { rule, auditId: audit.id, previousState: current.state };
  });
}
