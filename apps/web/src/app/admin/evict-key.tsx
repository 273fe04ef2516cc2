'use client';

import { useMutation } from '@tanstack/react-query';
import { useId, useState } from 'react';
import type { KeyView } from '~/server/admin/key-rows';
import { useTRPC } from '~/trpc/react';

type EvictableKey = Pick<KeyView, 'scope' | 'procedure' | 'key' | 'status' | 'version' | 'lockedUntil'>;

const warnings: Record<Exclude<KeyView['status'], 'stuck'>, { text: string; confirm: string }> = {
  in_flight: {
    text: 'This key is NOT stuck: its lease is live, so the request that holds it may still be running. Evicting it lets a retry run beside that request.',
    confirm: 'I understand a request may still be running with this key.',
  },
  completed: {
    text: 'This key is NOT stuck: it is completed. Evicting it forgets the stored answer, and the next retry with this key runs the procedure again.',
    confirm: 'I understand the stored answer will no longer be replayed.',
  },
};

/**
 * Evict with a confirmation step: a stuck key needs one click to confirm; any other key also needs the box
 * ticked (the server enforces the same rule, against the version shown here).
 */
export function EvictKeyControl({ target, onEvicted }: { target: EvictableKey; onEvicted: () => void }) {
  const trpc = useTRPC();
  const [open, setOpen] = useState(false);
  const [acknowledged, setAcknowledged] = useState(false);
  const titleId = useId();
  const evict = useMutation(
    trpc.admin.evictKey.mutationOptions({
      onSuccess() {
        setOpen(false);
        onEvicted();
      },
    }),
  );
  const status = target.status;
  const stuck = status === 'stuck';
  const warning = status === 'stuck' ? null : warnings[status];

  if (!open) {
    return (
      <button
        type="button"
        onClick={() => {
          evict.reset();
          setAcknowledged(false);
          setOpen(true);
        }}
        className={`rounded-full px-3 py-1 text-xs font-medium ${
          stuck
            ? 'bg-red-600 text-white hover:bg-red-700'
            : 'border border-stone-300 text-stone-700 hover:bg-stone-100'
        }`}
      >
        Evict…
      </button>
    );
  }
  return (
    <div
      role="alertdialog"
      aria-labelledby={titleId}
      className="mt-2 max-w-md rounded-xl border border-red-200 bg-red-50 p-4 text-left text-sm text-stone-800"
    >
      <p id={titleId} className="font-semibold text-red-900">
        Evict this key?
      </p>
      {stuck ? (
        <p className="mt-1">
          It is stuck: still processing, and its lease ended
          {target.lockedUntil ? ` at ${target.lockedUntil.toISOString().slice(11, 19)} UTC` : ''}. The request
          that claimed it is gone. Evicting deletes the row (kept in the audit log); the next retry runs as
          new.
        </p>
      ) : (
        <>
          <p className="mt-1">{warning?.text}</p>
          <label className="mt-3 flex items-start gap-2">
            <input
              type="checkbox"
              checked={acknowledged}
              onChange={(event) => setAcknowledged(event.target.checked)}
              className="mt-0.5"
            />
            <span>{warning?.confirm}</span>
          </label>
        </>
      )}
      {evict.error && (
        <p role="alert" className="mt-3 rounded-lg bg-white px-3 py-2 text-red-800">
          {evict.error.message}
        </p>
      )}
      <div className="mt-4 flex gap-3">
        <button
          type="button"
          disabled={evict.isPending || (!stuck && !acknowledged)}
          onClick={() =>
            evict.mutate({
              ref: { scope: target.scope, procedure: target.procedure, key: target.key },
              version: target.version,
              confirmNotStuck: !stuck && acknowledged,
            })
          }
          className="rounded-full bg-red-600 px-4 py-1.5 font-medium text-white hover:bg-red-700 disabled:opacity-50"
        >
          {evict.isPending ? 'Evicting…' : 'Evict key'}
        </button>
        <button
          type="button"
          onClick={() => setOpen(false)}
          className="rounded-full border border-stone-300 bg-white px-4 py-1.5 hover:bg-stone-100"
        >
          Cancel
        </button>
      </div>
    </div>
  );
}
