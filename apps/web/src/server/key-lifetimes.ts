/**
 * How long each party remembers one checkout intent's Idempotency-Key. They must form a chain —
 * browser intent < server key retention <= provider key retention — or a late retry can outlive the record that
 * would have replayed it and be charged as new. The environment sets them (IDEM_INTENT_MAX_AGE_HOURS,
 * IDEM_CHECKOUT_KEY_RETENTION_HOURS, PROVIDER_KEY_RETENTION_HOURS; `env.keyLifetimes`), and a configuration that
 * breaks the chain stops the server at startup with one line naming the broken link.
 */
export interface KeyLifetimes {
  /** After this the browser no longer re-sends an unresolved intent: it asks what happened to the order. */
  browserIntentHours: number;
  /** How long the server's idempotency-key row replays the stored answer (72 h: money needs 48–72 h). */
  serverRetentionHours: number;
  /** How long the payment provider remembers its Idempotency-Key (the provider's documented retention). */
  providerRetentionHours: number;
}

export const DEFAULT_KEY_LIFETIMES: KeyLifetimes = {
  browserIntentHours: 48,
  serverRetentionHours: 72,
  providerRetentionHours: 72,
};

/** The problems with a configuration, empty when the chain holds. */
export function keyLifetimeProblems(lifetimes: KeyLifetimes): string[] {
  const { browserIntentHours, serverRetentionHours, providerRetentionHours } = lifetimes;
  const problems: string[] = [];
  if (!(browserIntentHours > 0)) problems.push('the browser intent lifetime must be positive');
  if (!(browserIntentHours < serverRetentionHours))
    problems.push(
      `the browser intent lifetime (IDEM_INTENT_MAX_AGE_HOURS, ${browserIntentHours} h) must be shorter than the server's key retention (${serverRetentionHours} h)`,
    );
  if (!(serverRetentionHours <= providerRetentionHours))
    problems.push(
      `the server's key retention (IDEM_CHECKOUT_KEY_RETENTION_HOURS, ${serverRetentionHours} h) must not exceed the provider's (PROVIDER_KEY_RETENTION_HOURS, ${providerRetentionHours} h)`,
    );
  return problems;
}
