import { useEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';
import type { WireTransformer } from '../core/wire-form.ts';
import {
  ALIVE_STALE_MS,
  getIntentStore,
  isAlive,
  type KeyValueStorage,
  parseRecord,
} from './intent-store.ts';
import {
  jsonSerializer,
  type PayloadSerializer,
  serializePayload,
  transformerSerializer,
} from './payload.ts';

/**
 * How long an intent's key may be re-sent, from its first send: 12 h, half the server's default key retention
 * (`retentionSeconds`, 24 h), so a re-sent key is always one the server still remembers.
 */
export const DEFAULT_MAX_INTENT_AGE_MS = 12 * 60 * 60 * 1000;

export interface UseIdempotencyKeyOptions {
  /**
   * Where the intent's key (and an in-flight payload) is kept. Default `window.sessionStorage` (per tab,
   * survives reloads and back/forward); `null` keeps it in memory only (survives re-renders, not reloads).
   * Falls back to memory when storage is blocked or full.
   */
  storage?: KeyValueStorage | null;
  /**
   * The tRPC client's transformer, the one its links send with (`superjson`). It defines when two payloads are
   * the same request — as the server's fingerprint does — and how payloads are stored. Default: plain JSON.
   */
  transformer?: WireTransformer;
  /** How a sent payload is persisted. Default: as the transformer's wire form (plain JSON without one). */
  serializer?: PayloadSerializer;
  /**
   * How long after its first send an unresolved intent may still be re-sent. Past it the attempt is reported
   * `expired` and never re-sent: the server may have forgotten the key, and a re-send could run as new. Keep it
   * below the server's key retention. Default `DEFAULT_MAX_INTENT_AGE_MS` (12 h).
   */
  maxIntentAgeMs?: number;
}

/** An attempt that was sent and never resolved: the page reloaded mid-request, or retries ran out. */
export interface InDoubtAttempt<TPayload> {
  payload: TPayload;
  /** When it was sent (ms since the epoch). */
  sentAt: number;
  /**
   * Older than `maxIntentAgeMs`: it is not re-sent. Ask the server what became of it (its key and `payload`
   * identify the effect), then let the user start over.
   */
  expired: boolean;
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
  /** Another tab sharing the storage is waiting for the outcome of this intent's attempt right now. */
  inFlightElsewhere: boolean;
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
  /** The user explicitly starts a new intent: a new key, even if an attempt is in doubt. */
  reset(): void;
}

const serverSnapshot = () => null;
/** setTimeout's longest delay (about 24.8 days); a later deadline is re-armed when that one fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** @internal The options with their defaults applied. */
export interface IntentSettings {
  transformer: WireTransformer | undefined;
  serializer: PayloadSerializer;
  maxIntentAgeMs: number;
}

/** A record dated further ahead than this was written under another clock: its age is unknown. */
const CLOCK_SLACK_MS = 5 * 60 * 1000;

/**
 * True once an intent first sent at `createdAt` may no longer be re-sent — also when `createdAt` lies in the
 * future (the clock was turned back): an age that cannot be known is treated as too old, so it is checked.
 */
export function isIntentExpired(createdAt: number, maxIntentAgeMs: number, now = Date.now()): boolean {
  const age = now - createdAt;
  return age >= maxIntentAgeMs || age < -CLOCK_SLACK_MS;
}

/** What a render knows of the intent's sent attempt; `changesAt`: when that changes with the time alone. */
interface Seen<TPayload> {
  inDoubt: InDoubtAttempt<TPayload> | null;
  inFlightElsewhere: boolean;
  changesAt?: number | undefined;
}
const NOTHING_SENT: Seen<never> = { inDoubt: null, inFlightElsewhere: false };

/**
 * @internal The state both hooks share: the intent's store and record, and what this hook instance has in
 * flight. The actions on it (send, retire, reset) are each hook's own, so that a bundle with only
 * `useIdempotentMutation` carries no `IdempotencyKeyHandle`.
 */
export function useIntent<TPayload>(intentId: string, options: UseIdempotencyKeyOptions = {}) {
  const store = getIntentStore(intentId, options.storage);
  const { transformer } = options;
  const maxIntentAgeMs = options.maxIntentAgeMs ?? DEFAULT_MAX_INTENT_AGE_MS;
  if (!(maxIntentAgeMs > 0)) throw new RangeError('maxIntentAgeMs must be a positive number');
  const settings: IntentSettings = {
    transformer,
    serializer: options.serializer ?? (transformer ? transformerSerializer(transformer) : jsonSerializer),
    maxIntentAgeMs,
  };
  const settingsRef = useRef(settings);
  settingsRef.current = settings;
  // The stored text is the snapshot (the same string until it changes); parsed once per change.
  const raw = useSyncExternalStore(store.subscribe, store.read, serverSnapshot);
  const record = useMemo(() => parseRecord(raw), [raw]);
  // The last sign of life of a tab waiting for the sent attempt's outcome (kept apart from the record).
  const aliveAt = useSyncExternalStore(store.subscribe, store.aliveAt, serverSnapshot);
  // The key of an attempt THIS hook instance has in flight: its `sent` payload is not in doubt (yet).
  const [inFlightKey, setInFlightKey] = useState<string | null>(null);
  // Bumped when a time-based fact changes (another tab's attempt goes quiet, an intent expires).
  const [clock, setClock] = useState(0);

  // Create the key after mount (never during render: no storage on the server, no hydration mismatch).
  useEffect(() => {
    if (!record) store.ensure();
  }, [store, record]);

  // Re-evaluated on each `clock` tick: what is alive or expired depends on the time, not only the record.
  // biome-ignore lint/correctness/useExhaustiveDependencies: `clock` is the tick that re-evaluates it.
  const seen = useMemo((): Seen<TPayload> => {
    const sent = record?.sent;
    if (!sent || record.key === inFlightKey) return NOTHING_SENT;
    const now = Date.now();
    // Another tab is still waiting for this attempt's outcome: in flight, not in doubt.
    if (isAlive(aliveAt, now))
      return { inDoubt: null, inFlightElsewhere: true, changesAt: (aliveAt ?? now) + ALIVE_STALE_MS };
    try {
      const payload = settingsRef.current.serializer.parse(sent.payload) as TPayload;
      const expired = isIntentExpired(record.createdAt, maxIntentAgeMs, now);
      return {
        inDoubt: { payload, sentAt: sent.at, expired },
        inFlightElsewhere: false,
        changesAt: expired ? undefined : record.createdAt + maxIntentAgeMs,
      };
    } catch {
      return NOTHING_SENT;
    }
  }, [record, aliveAt, inFlightKey, clock, maxIntentAgeMs]);

  const { changesAt } = seen;
  useEffect(() => {
    if (changesAt === undefined) return;
    const timer = setTimeout(
      () => setClock((tick) => tick + 1),
      Math.min(Math.max(0, changesAt - Date.now()) + 10, MAX_TIMER_MS),
    );
    return () => clearTimeout(timer);
  }, [changesAt]);

  return { store, record, seen, settingsRef, setInFlightKey };
}

/**
 * One idempotency key per intent, kept in sessionStorage under `idem:intent:<intentId>`: the same key
 * across re-renders, reloads and back-and-resubmit, until `retire()` (final outcome) or `reset()` (the user
 * starts a new intent). `key` is null until mounted (see `IdempotencyKeyHandle.key`).
 */
export function useIdempotencyKey<TPayload = unknown>(
  intentId: string,
  options?: UseIdempotencyKeyOptions,
): IdempotencyKeyHandle<TPayload> {
  const { store, record, seen, settingsRef, setInFlightKey } = useIntent<TPayload>(intentId, options);

  // Stable for a given store, like the store itself.
  const actions = useMemo(
    (): Omit<IdempotencyKeyHandle<TPayload>, 'key' | 'inDoubt' | 'inFlightElsewhere'> => ({
      markSent(payload) {
        const record = store.ensure();
        const { serializer, transformer } = settingsRef.current;
        const now = Date.now();
        const sent = { payload: serializePayload(serializer, payload, transformer), at: now };
        // The intent's age counts from its first send.
        store.write({ ...record, createdAt: record.sent ? record.createdAt : now, sent });
        setInFlightKey(record.key);
        return record.key;
      },
      markInDoubt: () => setInFlightKey(null),
      retire(retiredKey) {
        const current = parseRecord(store.read());
        if (current) store.retire(retiredKey ?? current.key);
        // A stale key's late outcome leaves a newer attempt of this hook in flight (not in doubt).
        setInFlightKey((inFlight) => (retiredKey === undefined || retiredKey === inFlight ? null : inFlight));
      },
      reset() {
        store.ensure(true);
        setInFlightKey(null);
      },
    }),
    [store, settingsRef, setInFlightKey],
  );

  return useMemo(
    () => ({
      key: record?.key ?? null,
      inDoubt: seen.inDoubt,
      inFlightElsewhere: seen.inFlightElsewhere,
      ...actions,
    }),
    [record, seen, actions],
  );
}
