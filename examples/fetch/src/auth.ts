/**
 * Who is calling. A stand-in for your real authentication (a session, a JWT): two fixed demo tokens. The key's
 * scope is this principal, so it must come from something the server verifies, never from the request body.
 */
export const demoTokens: Readonly<Record<string, string>> = {
  'demo-token-alice': 'user:alice',
  'demo-token-bob': 'user:bob',
};

/** The principal behind an `Authorization: Bearer <token>` header, or null. */
export function principalOf(authorization: string | null): string | null {
  const token = /^Bearer (.+)$/.exec(authorization ?? '')?.[1];
  return token === undefined ? null : (demoTokens[token] ?? null);
}
