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
 * The library's key operations apply the rule (`evict`): the check and the delete happen under the row's lock,
 * against the version the admin looked at, so a key that was claimed, taken over or completed since then is
 * refused. This file writes the audit row (who, when, which key, the row as it was, which rule allowed it) in
 * the same transaction as the delete, and turns a refusal into the admin API's error.
 */
import type { Database, Prisma } from '@idem/db';
import type { EvictionRule } from '@idem/idempotency/prisma';
import { TRPCError } from '@trpc/server';
import type { KeyRef } from '~/lib/key-ref';
import type { AdminPrincipal } from '../auth/principal.ts';
import { keyOperations } from './key-rows.ts';
import { EVICT_ACTION } from './key-trail.ts';

export type { EvictionRule } from '@idem/idempotency/prisma';
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
  const result = await keyOperations(db).evict({
    key: ref,
    version: request.version,
    confirmed: request.confirmNotStuck,
    // In the eviction's transaction: the audit row commits with the delete, or neither does.
    audit: async (tx, { rule, before, storedResponse }) => {
      const snapshot: Prisma.InputJsonObject = {
        ...before,
        lockedUntil: before.lockedUntil?.toISOString() ?? null,
        createdAt: before.createdAt.toISOString(),
        expiresAt: before.expiresAt.toISOString(),
        response: storedResponse,
      };
      const audit = await tx.adminAuditEvent.create({
        data: {
          actor: admin.id,
          actorEmail: admin.email,
          action: EVICT_ACTION,
          target: { scope: ref.scope, procedure: ref.procedure, key: ref.key },
          before: snapshot,
          detail: { rule, state: before.state },
        },
        select: { id: true },
      });
      return audit.id;
    },
  });
  if (result.evicted) {
    return { rule: result.rule, auditId: result.audit, previousState: result.before.state };
  }
  switch (result.reason) {
    case 'gone':
      throw adminError(
        'NOT_FOUND',
        'key_gone',
        'This key is gone already (evicted, cleaned up, or released).',
      );
    case 'changed':
      throw adminError(
        'CONFLICT',
        'key_changed',
        'This key changed since you looked at it (claimed, taken over or completed). Review it again.',
      );
    case 'unconfirmed':
      throw adminError(
        'PRECONDITION_FAILED',
        'not_stuck',
        result.row?.state === 'completed'
          ? 'This key is completed: evicting it makes the next retry run the procedure again. Confirm explicitly.'
          : 'This key has a live lease: its request may still be running. Confirm explicitly.',
      );
  }
}
