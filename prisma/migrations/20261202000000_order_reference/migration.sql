-- Issue 26: an order carries what its charge will be, from its first transaction on.
--
-- "reference": the order's public name and the Idempotency-Key of its charge. Random, so a key
-- is never reused: not after a schema reset that restarts the order ids at 1 (a gateway keeps its
-- keys), not across runs. The shop mints it with node:crypto (ord_<base64url of 16 bytes>); the
-- default (gen_random_uuid, also a strong random) only covers rows written by other code.
ALTER TABLE "Order" ADD COLUMN "reference" TEXT;
UPDATE "Order" SET "reference" = 'ord_' || replace(gen_random_uuid()::text, '-', '') WHERE "reference" IS NULL;
ALTER TABLE "Order" ALTER COLUMN "reference" SET DEFAULT ('ord_' || replace(gen_random_uuid()::text, '-', ''));
ALTER TABLE "Order" ALTER COLUMN "reference" SET NOT NULL;
CREATE UNIQUE INDEX "Order_reference_key" ON "Order"("reference");

-- "amountCents": the price at creation, the amount the charge always carries. Null only on rows
-- written before this migration or by other code: the shop records it with the intent then.
ALTER TABLE "Order" ADD COLUMN "amountCents" INTEGER;

-- When the intent (paymentKey) was recorded: the reconciler settles an intent older than the
-- lock's TTL that is still unpaid.
ALTER TABLE "Order" ADD COLUMN "paymentIntentAt" TIMESTAMP(3);

-- An order the reconciler found uncharged is cancelled and its unit returned to the stock.
ALTER TYPE "OrderStatus" ADD VALUE IF NOT EXISTS 'cancelled';

CREATE INDEX "GatewayCharge_idempotencyKey_idx" ON "GatewayCharge"("idempotencyKey");
