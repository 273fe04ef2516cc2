'use client';

import Link from 'next/link';
import { shortKey } from '~/lib/key-ref';
import type { KeyView } from '~/server/admin/key-rows';
import { EvictKeyControl } from './evict-key';
import { formatRelative, formatUtc, shortHash } from './format';
import { KeyStatusBadge } from './key-status-badge';

export type KeyRow = KeyView & { matchedBy?: string };

/** Keys as a table: state, short fingerprint, lease, replays, created/expires, the trail, and evict. */
export function KeyTable({
  keys,
  now,
  onEvicted,
  label,
}: {
  keys: KeyRow[];
  now: number;
  onEvicted: () => void;
  label: string;
}) {
  return (
    <div className="overflow-x-auto rounded-xl border border-stone-200 bg-white">
      <table className="w-full text-left text-sm" aria-label={label}>
        <thead className="border-b border-stone-200 bg-stone-50 text-xs uppercase tracking-wide text-stone-500">
          <tr>
            <th className="px-3 py-2 font-medium">Key</th>
            <th className="px-3 py-2 font-medium">State</th>
            <th className="px-3 py-2 font-medium">Principal</th>
            <th className="px-3 py-2 font-medium">Fingerprint</th>
            <th className="px-3 py-2 font-medium">Lease</th>
            <th className="px-3 py-2 font-medium">Replays</th>
            <th className="px-3 py-2 font-medium">Created / expires</th>
            <th className="px-3 py-2 font-medium">
              <span className="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody className="divide-y divide-stone-100">
          {keys.map((key) => (
            <tr key={key.ref} data-testid="key-row" data-key={key.key} className="align-top">
              <td className="px-3 py-2">
                <Link
                  href={`/admin/keys/${key.ref}`}
                  className="font-mono text-brand-700 underline"
                  title={key.key}
                >
                  {shortKey(key.key)}
                </Link>
                <p className="font-mono text-xs text-stone-500">{key.procedure}</p>
                {key.matchedBy && key.matchedBy !== 'recent' && (
                  <p className="text-xs text-stone-500">matched by {key.matchedBy.replace('_', ' ')}</p>
                )}
              </td>
              <td className="px-3 py-2">
                <KeyStatusBadge status={key.status} />
                {key.httpStatus !== null && (
                  <p className="mt-1 font-mono text-xs text-stone-500">HTTP {key.httpStatus}</p>
                )}
              </td>
              <td className="px-3 py-2 font-mono text-xs" title={key.scope}>
                {shortKey(key.scope, 14)}
              </td>
              <td className="px-3 py-2 font-mono text-xs" title={key.fingerprint}>
                {shortHash(key.fingerprint)}
              </td>
              <td className="px-3 py-2 text-xs">
                {key.state === 'processing' && key.lockedUntil ? (
                  <>
                    <span className="font-mono" title={key.leaseOwner ?? ''}>
                      {key.leaseOwner?.slice(0, 8) ?? '—'}
                    </span>
                    <p className={key.status === 'stuck' ? 'text-red-700' : 'text-stone-500'}>
                      {key.status === 'stuck' ? 'ended ' : 'until '}
                      {formatRelative(key.lockedUntil, now)}
                    </p>
                  </>
                ) : (
                  <span className="text-stone-500">—</span>
                )}
              </td>
              <td className="px-3 py-2 font-mono">{key.replayCount}</td>
              <td className="px-3 py-2 text-xs text-stone-600">
                <p title={formatUtc(key.createdAt)}>{formatRelative(key.createdAt, now)}</p>
                <p className={key.expired ? 'text-stone-500' : ''} title={formatUtc(key.expiresAt)}>
                  {key.expired ? 'expired' : `expires ${formatRelative(key.expiresAt, now)}`}
                </p>
              </td>
              <td className="px-3 py-2 text-right">
                <EvictKeyControl target={key} onEvicted={onEvicted} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
