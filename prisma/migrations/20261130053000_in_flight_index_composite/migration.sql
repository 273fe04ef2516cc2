-- The partial in-flight index (scope) WHERE state = 'processing' made `prisma migrate dev` (offline engine)
-- generate it again in every new migration. A plain composite index serves the same count without drift.
DROP INDEX "idempotency_keys_in_flight_idx";

-- CreateIndex
CREATE INDEX "idempotency_keys_in_flight_idx" ON "idempotency_keys"("scope", "state");
