-- CreateEnum
CREATE TYPE "user_role" AS ENUM ('customer', 'admin');

-- AlterTable
ALTER TABLE "users" ADD COLUMN     "role" "user_role" NOT NULL DEFAULT 'customer';

-- CreateTable
CREATE TABLE "idempotency_stats" (
    "bucket" TIMESTAMPTZ(6) NOT NULL,
    "procedure" TEXT NOT NULL,
    "outcome" TEXT NOT NULL,
    "count" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "idempotency_stats_pkey" PRIMARY KEY ("bucket","procedure","outcome")
);

-- CreateTable
CREATE TABLE "operational_counters" (
    "name" TEXT NOT NULL,
    "label" TEXT NOT NULL DEFAULT '',
    "value" BIGINT NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "operational_counters_pkey" PRIMARY KEY ("name","label")
);

-- CreateTable
CREATE TABLE "admin_audit_events" (
    "id" UUID NOT NULL,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "actor" TEXT NOT NULL,
    "actor_email" TEXT NOT NULL,
    "action" TEXT NOT NULL,
    "target" JSONB NOT NULL,
    "before" JSONB,
    "detail" JSONB,

    CONSTRAINT "admin_audit_events_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "admin_audit_events_action_created_at_idx" ON "admin_audit_events"("action", "created_at" DESC);
