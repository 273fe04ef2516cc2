-- CreateTable
CREATE TABLE "idempotency_outbox" (
    "seq" BIGSERIAL NOT NULL,
    "id" VARCHAR(255) NOT NULL,
    "type" TEXT NOT NULL,
    "destination" TEXT NOT NULL,
    "body" TEXT NOT NULL,
    "headers" TEXT,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "sent_at" TIMESTAMPTZ(6),

    CONSTRAINT "idempotency_outbox_pkey" PRIMARY KEY ("seq")
);

-- CreateIndex
CREATE UNIQUE INDEX "idempotency_outbox_id_key" ON "idempotency_outbox"("id");

-- CreateIndex
CREATE INDEX "idempotency_outbox_sent_at_seq_idx" ON "idempotency_outbox"("sent_at", "seq");
