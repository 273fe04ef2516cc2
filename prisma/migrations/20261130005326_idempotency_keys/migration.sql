-- CreateTable
CREATE TABLE "idempotency_keys" (
    "scope" TEXT NOT NULL,
    "procedure" TEXT NOT NULL,
    "key" VARCHAR(255) NOT NULL,
    "fingerprint" CHAR(64) NOT NULL,
    "state" TEXT NOT NULL,
    "response" TEXT,
    "http_status" INTEGER,
    "lease_owner" UUID,
    "locked_until" TIMESTAMPTZ(6),
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(6) NOT NULL,
    "replay_count" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY ("scope","procedure","key")
);

-- CreateIndex
CREATE INDEX "idempotency_keys_expires_at_idx" ON "idempotency_keys"("expires_at");
