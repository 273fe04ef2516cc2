/**
 * @idem/contracts — what the apps must agree on and nothing else: the persisted counters and their writes, the
 * Idempotency-Key sent to the card processor, the queue names, the production-secret rule. No runtime dependencies beyond the library's
 * table-name constant, so every app and test can import it.
 */
export {
  type CounterId,
  incrementCounter,
  incrementCounterSql,
  PersistedCounter,
  type PersistedCounterName,
  type SqlRunner,
  WorkerCounter,
} from './counters.ts';
export { providerChargeKey, providerRefundKey } from './provider-key.ts';
export { Queue, type QueueName } from './queues.ts';
export { MIN_SECRET_LENGTH, missingProductionSecret, productionSecretProblem } from './secrets.ts';
