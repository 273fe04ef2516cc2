-- AlterTable
ALTER TABLE "orders" ADD COLUMN     "charge_attempted_at" TIMESTAMPTZ(6),
ADD COLUMN     "reconciled_at" TIMESTAMPTZ(6),
ADD COLUMN     "reconciled_outcome" TEXT;

-- CreateIndex
CREATE INDEX "orders_status_created_at_idx" ON "orders"("status", "created_at");
