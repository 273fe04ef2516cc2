-- The in-flight index leads with state: (state, scope). Leading with scope, it could also serve a lookup by
-- (scope, procedure, key), and a prepared statement's generic plan, made while the table was small, read the
-- key's row through it — every key of the principal, on every claim (docs/BENCHMARKS.md). Now only the primary
-- key can serve that lookup, and the in-flight count reads (state = 'processing', scope) as before.
DROP INDEX "idempotency_keys_in_flight_idx";

-- CreateIndex
CREATE INDEX "idempotency_keys_in_flight_idx" ON "idempotency_keys"("state", "scope");
