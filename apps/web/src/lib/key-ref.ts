/**
 * One idempotency key's identity — (principal scope, procedure, key), the table's primary key — as an input
 * schema for the admin procedures and as an opaque, URL-safe segment for /admin/keys/[ref]. Browser and server.
 */
import { z } from 'zod';

export const keyRefSchema = z.object({
  scope: z.string().min(1).max(300),
  procedure: z.string().min(1).max(300),
  key: z.string().min(1).max(255),
});
export type KeyRef = z.infer<typeof keyRefSchema>;

const refTuple = z.tuple([z.string(), z.string(), z.string()]);

/** base64url of the JSON [scope, procedure, key] (UTF-8). */
export function encodeKeyRef(ref: KeyRef): string {
  let binary = '';
  for (const byte of new TextEncoder().encode(JSON.stringify([ref.scope, ref.procedure, ref.key])))
    binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

/** The ref in a URL segment, or null for anything that is not one. */
export function decodeKeyRef(segment: string): KeyRef | null {
  try {
    const binary = atob(segment.replaceAll('-', '+').replaceAll('_', '/'));
    const bytes = Uint8Array.from(binary, (char) => char.charCodeAt(0));
    const tuple = refTuple.safeParse(JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)));
    if (!tuple.success) return null;
    const [scope, procedure, key] = tuple.data;
    const ref = keyRefSchema.safeParse({ scope, procedure, key });
    return ref.success ? ref.data : null;
  } catch {
    return null;
  }
}

/** The stable, unique part of a key for display: its first and last characters. */
export function shortKey(key: string, edge = 8): string {
  return key.length <= edge * 2 + 1 ? key : `${key.slice(0, edge)}…${key.slice(-4)}`;
}
