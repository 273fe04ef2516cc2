/** Stripe-looking object ids: `<prefix>_` + 24 random alphanumerics (`ch_…`, `re_…`, `evt_…`). */
import { randomInt } from 'node:crypto';

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

export function newId(prefix: string): string {
  let id = `${prefix}_`;
  // crypto.randomInt is uniform over the alphabet (no modulo bias) and unpredictable, unlike Math.random.
  for (let i = 0; i < 24; i += 1) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)];
  return id;
}
