-- CreateIndex
CREATE INDEX "idempotency_keys_in_flight_idx" ON "idempotency_keys"("scope") WHERE (state = 'processing');
