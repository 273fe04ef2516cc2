/**
 * Reading the benchmarks' knobs (environment variables). An unset or empty variable takes the default; a value
 * that is set must be valid, and an invalid one is refused with the variable's name, before anything is measured.
 */

/** The environment, or any object standing in for it (a test's). */
export type Env = Readonly<Record<string, string | undefined>>;

const isUnset = (raw: string | undefined): raw is undefined | '' => raw === undefined || raw.trim() === '';

/** A non-negative integer; underscores may group digits (1_000_000). */
export function intKnob(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (isUnset(raw)) return fallback;
  const value = Number(raw.replaceAll('_', ''));
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer`);
  return value;
}

/** A switch: 1 (on) or 0 (off). */
export function flagKnob(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (isUnset(raw)) return fallback;
  if (raw.trim() === '1') return true;
  if (raw.trim() === '0') return false;
  throw new Error(`${name} must be 1 or 0`);
}

/** A comma-separated list; empty items are dropped. */
export function listKnob(env: Env, name: string, fallback: readonly string[]): string[] {
  const raw = env[name];
  if (isUnset(raw)) return [...fallback];
  return raw
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
}

/** A string such as a URL. */
export function stringKnob(env: Env, name: string, fallback: string): string {
  const raw = env[name];
  return isUnset(raw) ? fallback : raw;
}
