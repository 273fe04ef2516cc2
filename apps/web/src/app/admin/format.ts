/** Display helpers shared by the admin pages (server and client render the same text: UTC, no locale). */

export function formatUtc(value: Date | null | undefined): string {
  if (!value) return '—';
  return `${value.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** "in 4 min" / "12 s ago", relative to `now`. */
export function formatRelative(value: Date, now: number): string {
  const seconds = Math.round((value.getTime() - now) / 1000);
  const magnitude = Math.abs(seconds);
  const text =
    magnitude < 90
      ? `${magnitude} s`
      : magnitude < 90 * 60
        ? `${Math.round(magnitude / 60)} min`
        : magnitude < 36 * 3600
          ? `${Math.round(magnitude / 3600)} h`
          : `${Math.round(magnitude / 86_400)} d`;
  return seconds >= 0 ? `in ${text}` : `${text} ago`;
}

/** "1 charge" / "3 charges": a count and its noun, in the plural unless the count is one. */
export function countOf(count: number, noun: string, plural = `${noun}s`): string {
  return `${count} ${count === 1 ? noun : plural}`;
}

export function shortHash(value: string, length = 12): string {
  return value.trim().slice(0, length);
}

export const OUTCOME_COLORS = {
  executed: '#2f6b55',
  replayed: '#0284c7',
  conflict: '#d97706',
  mismatch: '#7c3aed',
  rejected: '#78716c',
  released: '#e11d48',
} as const;

export const OUTCOME_HELP: Record<keyof typeof OUTCOME_COLORS, string> = {
  executed: 'ran the procedure',
  replayed: 'duplicate answered from the stored result',
  conflict: 'duplicate while the first was running (409)',
  mismatch: 'same key, different request (422)',
  rejected: 'missing or malformed key (400)',
  released: 'transient failure, key released for a retry',
};
