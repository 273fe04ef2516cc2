import { useEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';
import { getIntentStore, type KeyValueStorage, parseRecord } from './intent-store.ts';
import { jsonSerializer, type PayloadSerializer, serializePayload } from './payload.ts';

export interface UseIdempotencyKeyOptions {
  /**
   * Where the intent's key (and an in-flight payload) is kept. Default `window.sessionStorage` (per tab,
   * survives reloads and back/forward); `null` keeps it in memory only (survives re-renders, not reloads).
   * Falls back to memory when storage is blocked or full.
   */
  storage?: KeyValueStorage | null;
  /** How a sent payload is persisted. Default JSON; pass `superjson` if the input holds Dates, Maps, … */
  serializer?: PayloadSerializer;
}

/** An attempt that was sent and never resolved: the page reloaded mid-request, or retries ran out. */
export interface InDoubtAttempt<TPayload> {
  payload: TPayload;
  /** When it was sent (ms since the epoch). */
  sentAt: number;
}

export interface IdempotencyKeyHandle<TPayload> {
  /**
   * The intent's key. `null` during server rendering and the hydration render (sessionStorage exists only
   * in the browser, and a key rendered on the server could not match the tab's one); set right after mount.
   * Only use it in effects and event handlers — which run after mount — or read it through `markSent`.
   */
  key: string | null;
  /** An earlier attempt of this intent that may or may not have gone through, else null. */
  inDoubt: InDoubtAttempt<TPayload> | null;
  /**
   * Call right before sending an attempt with `payload`: persists it with the key (so a reload mid-request
   * shows it as `inDoubt`) and returns the key to send. Throws if the payload does not survive `serializer`.
   */
  markSent(payload: TPayload): string;
  /**
   * The attempt ended without a definite outcome (retries exhausted on a network error, 5xx or 409): the key
   * and payload are kept, and `inDoubt` reports them. Resend the same payload with the same key to resolve it.
   */
  markInDoubt(): void;
  /**
   * A final outcome arrived (success, or a deterministic error such as a declined card): forget the key, so
   * the next attempt is a new intent with a new key. With `key`, only if the intent still has that key.
   */
  retire(key?: string): void;
  /** The user explicitly starts a new purchase: a new key, even if an attempt is in doubt. */
  reset(): void;
}

const serverSnapshot = () => null;

/**
 * @internal The state both hooks share: the intent's store and record, and what this hook instance has in
 * flight. The actions on it (send, retire, reset) are each hook's own, so that a bundle with only
 * `useIdempotentMutation` carries no `IdempotencyKeyHandle`.
 */
export function useIntent<TPayload>(intentId: string, options: UseIdempotencyKeyOptions = {}) {
  const store = getIntentStore(intentId, options.storage);
  const serializerRef = useRef(options.serializer ?? jsonSerializer);
  serializerRef.current = options.serializer ?? jsonSerializer;
  // The stored text is the snapshot (the same string until it changes); parsed once per change.
  const raw = useSyncExternalStore(store.subscribe, store.read, serverSnapshot);
  const record = useMemo(() => parseRecord(raw), [raw]);
  // The key of an attempt THIS hook instance has in flight: its `sent` payload is not in doubt (yet).
  const [inFlightKey, setInFlightKey] = useState<string | null>(null);

  // Create the key after mount (never during render: no storage on the server, no hydration mismatch).
  useEffect(() => {
    if (record === null) store.ensure();
  }, [store, record]);

  const inDoubt = useMemo((): InDoubtAttempt<TPayload> | null => {
    const sent = record?.sent;
    if (!sent || record.key === inFlightKey) return null;
    try {
      return { payload: serializerRef.current.parse(sent.payload) as TPayload, sentAt: sent.at };
    } catch {
      return null;
    }
  }, [record, inFlightKey]);

  return { store, record, inDoubt, serializerRef, setInFlightKey };
}

/**
 * One idempotency key per purchase intent, kept in sessionStorage under `idem:intent:<intentId>`: the same key
 * across re-renders, reloads and back-and-resubmit, until `retire()` (final outcome) or `reset()` (the user
 * starts a new purchase). `key` is null until mounted (see `IdempotencyKeyHandle.key`).
 */
export function useIdempotencyKey<TPayload = unknown>(
  intentId: string,
  options?: UseIdempotencyKeyOptions,
): IdempotencyKeyHandle<TPayload> {
  const { store, record, inDoubt, serializerRef, setInFlightKey } = useIntent<TPayload>(intentId, options);

  // Stable for a given store, like the store itself.
  const actions = useMemo(
    (): Omit<IdempotencyKeyHandle<TPayload>, 'key' | 'inDoubt'> => ({
      markSent(payload) {
        const record = store.ensure();
        const sent = { payload: serializePayload(serializerRef.current, payload), at: Date.now() };
        store.write({ ...record, sent });
        setInFlightKey(record.key);
        return record.key;
      },
      markInDoubt: () => setInFlightKey(null),
      retire(retiredKey) {
        const current = parseRecord(store.read());
        if (current) store.retire(retiredKey ?? current.key);
        setInFlightKey(null);
      },
      reset() {
        store.replace();
        setInFlightKey(null);
      },
    }),
    [store, serializerRef, setInFlightKey],
  );

  return useMemo(() => ({ key: record?.key ?? null, inDoubt, ...actions }), [record, inDoubt, actions]);
}
