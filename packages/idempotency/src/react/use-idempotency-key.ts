import { useEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';
import { plainJsonWire } from '../core/wire-form.ts';
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
  type PayloadTransformer,
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
  transformer?: PayloadTransformer;
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
  transformer: PayloadTransformer | undefined;
  serializer: PayloadSerializer;
  maxIntentAgeMs: number;
}

function resolveSettings(options: UseIdempotencyKeyOptions): IntentSettings {
  const maxIntentAgeMs = options.maxIntentAgeMs ?? DEFAULT_MAX_INTENT_AGE_MS;
  if (!(maxIntentAgeMs > 0)) throw new RangeError('maxIntentAgeMs must be a positive number of milliseconds');
  const { transformer } = options;
  const serializer =
    options.serializer ?? (transformer ? transformerSerializer(transformer) : jsonSerializer);
  return { transformer, serializer, maxIntentAgeMs };
}

/** A record dated further ahead than this was written under another clock: its age is unknown. */
const CLOCK_SLACK_MS = 5 * 60 * 1000;

/**
 * True once an intent first sent at `createdAt` may no longer be re-sent — also when `createdAt` lies in the
 * future (the clock was turned back): an age that cannot be known is treated as too old, so it is checked.
 */
export function isIntentExpired(createdAt: number, settings: IntentSettings, now = Date.now()): boolean {
  const age = now - createdAt;
  return age >= settings.maxIntentAgeMs || age < -CLOCK_SLACK_MS;
}

/**
 * @internal The state both hooks share: the intent's store and record, and what this hook instance has in
 * flight. The actions on it (send, retire, reset) are each hook's own, so that a bundle with only
 * `useIdempotentMutation` carries no `IdempotencyKeyHandle`.
 */
export function useIntent<TPayload>(intentId: string, options: UseIdempotencyKeyOptions = {}) {
  const store = getIntentStore(intentId, options.storage);
  const settings = resolveSettings(options);
  const settingsRef = useRef(settings);
  settingsRef.current = settings;
  // The stored text is the snapshot (the same string until it changes); parsed once per change.
  const raw = useSyncExternalStore(store.subscribe, store.read, serverSnapshot);
  const record = useMemo(() => parseRecord(raw), [raw]);
  // The key of an attempt THIS hook instance has in flight: its `sent` payload is not in doubt (yet).
  const [inFlightKey, setInFlightKey] = useState<string | null>(null);
  // Bumped when a time-based fact changes (another tab's attempt goes quiet, an intent expires).
  const [clock, setClock] = useState(0);

  // Create the key after mount (never during render: no storage on the server, no hydration mismatch).
  useEffect(() => {
    if (record === null) store.ensure();
  }, [store, record]);

  const { maxIntentAgeMs } = settings;
  const seen = useMemo(() => {
    // Re-evaluated on each `clock` tick: what is alive or expired depends on the time, not only the record.
    void clock;
    const sent = record?.sent ?? null;
    const none = { inDoubt: null, inFlightElsewhere: false, changesAt: null };
    if (!record || !sent || record.key === inFlightKey) return none;
    const now = Date.now();
    // Another tab is still waiting for this attempt's outcome: in flight, not in doubt.
    if (isAlive(sent, now))
      return { ...none, inFlightElsewhere: true, changesAt: (sent.alive ?? now) + ALIVE_STALE_MS };
    const expiresAt = record.createdAt + maxIntentAgeMs;
    try {
      const payload = settingsRef.current.serializer.parse(sent.payload) as TPayload;
      const expired = isIntentExpired(record.createdAt, settingsRef.current, now);
      const inDoubt: InDoubtAttempt<TPayload> = { payload, sentAt: sent.at, expired };
      return { inDoubt, inFlightElsewhere: false, changesAt: inDoubt.expired ? null : expiresAt };
    } catch {
      return none;
    }
  }, [record, inFlightKey, clock, maxIntentAgeMs]);

  useEffect(() => {
    if (seen.changesAt === null) return;
    const delay = Math.min(Math.max(0, seen.changesAt - Date.now()) + 10, MAX_TIMER_MS);
    const timer = setTimeout(() => setClock((tick) => tick + 1), delay);
    return () => clearTimeout(timer);
  }, [seen.changesAt]);

  return {
    store,
    record,
    inDoubt: seen.inDoubt,
    inFlightElsewhere: seen.inFlightElsewhere,
    settingsRef,
    setInFlightKey,
  };
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
  const { store, record, inDoubt, inFlightElsewhere, settingsRef, setInFlightKey } = useIntent<TPayload>(
    intentId,
    options,
  );

  // Stable for a given store, like the store itself.
  const actions = useMemo(
    (): Omit<IdempotencyKeyHandle<TPayload>, 'key' | 'inDoubt' | 'inFlightElsewhere'> => ({
      markSent(payload) {
        const record = store.ensure();
        const { serializer, transformer } = settingsRef.current;
        const now = Date.now();
        const sent = {
          payload: serializePayload(serializer, payload, transformer ?? plainJsonWire),
          at: now,
        };
        // The intent's age counts from its first send.
        store.write({ ...record, createdAt: record.sent ? record.createdAt : now, sent });
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
    [store, settingsRef, setInFlightKey],
  );

  return useMemo(
    () => ({ key: record?.key ?? null, inDoubt, inFlightElsewhere, ...actions }),
    [record, inDoubt, inFlightElsewhere, actions],
  );
}
