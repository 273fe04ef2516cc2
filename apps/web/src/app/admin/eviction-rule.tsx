/** The eviction rule, in words, wherever an admin can evict. */
export function EvictionRule() {
  return (
    <div
      className="rounded-xl border border-stone-200 bg-stone-50 p-4 text-sm text-stone-700"
      data-testid="eviction-rule"
    >
      <p className="font-semibold text-stone-900">When is evicting a key safe?</p>
      <ul className="mt-2 list-disc space-y-1 pl-5">
        <li>
          <strong>Stuck</strong> (processing, lease ended): the request that claimed the key died mid-way.
          Evicting it is safe: the client&apos;s next retry runs as new — for checkout, with the same order id
          and provider key, so it resumes the same order and cannot charge twice.
        </li>
        <li>
          <strong>In flight</strong> (lease live) or <strong>completed</strong>: needs an explicit
          confirmation. A live request may still be running, so a retry could run beside it; a completed
          key&apos;s stored answer stops being replayed and the next retry runs the procedure again.
        </li>
        <li>
          The key must not have changed since you looked at it, and every eviction is kept in the audit log.
        </li>
      </ul>
    </div>
  );
}
