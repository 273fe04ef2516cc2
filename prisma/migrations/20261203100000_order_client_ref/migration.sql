-- AlterTable
ALTER TABLE "orders" ADD COLUMN     "client_ref" TEXT;

-- CreateIndex
CREATE INDEX "orders_client_ref_created_at_idx" ON "orders"("client_ref", "created_at" DESC);
