/**
 * `pnpm seed`: fills the catalog and creates the demo API users and the demo admin. Safe to run again: existing
 * rows (by sku, email, token hash) are left as they are, so stock that orders consumed is not reset; only the
 * demo users' roles are set again.
 */
import { pathToFileURL } from 'node:url';
import { createPrismaClient, type Database, hashApiToken } from '@idem/db';
import { demoAdmin, demoProducts, demoUsers } from './seed-data.ts';

export async function seedDatabase(db: Database) {
  const products = await db.product.createMany({ data: [...demoProducts], skipDuplicates: true });
  for (const demo of demoUsers) {
    // Two statements, each idempotent on a unique index; a concurrent seed cannot create duplicates.
    await db.user.createMany({
      data: [{ email: demo.email, name: demo.name, role: demo.role }],
      skipDuplicates: true,
    });
    // An absolute value, so a database seeded before roles existed gets its demo admin too.
    await db.user.updateMany({ where: { email: demo.email }, data: { role: demo.role } });
    const user = await db.user.findUniqueOrThrow({ where: { email: demo.email } });
    await db.apiToken.createMany({
      data: [{ userId: user.id, label: 'demo', tokenHash: hashApiToken(demo.token) }],
      skipDuplicates: true,
    });
  }
  return { productsCreated: products.count };
}

async function main() {
  const connectionString = process.env.DATABASE_URL;
  if (!connectionString) {
    console.error(
      'DATABASE_URL is not set. `pnpm dev` seeds its own database; to seed another, set DATABASE_URL.',
    );
    process.exit(1);
  }
  const db = createPrismaClient({ connectionString, max: 2 });
  try {
    const { productsCreated } = await seedDatabase(db);
    console.log(`Seeded ${productsCreated} new products (${demoProducts.length} in the demo catalog).`);
    console.log('Demo API tokens (send as Authorization: Bearer <token>):');
    for (const demo of demoUsers) console.log(`  ${demo.email.padEnd(20)} ${demo.token}`);
    console.log(`Admin dashboard: /admin — sign in at /admin/login with ${demoAdmin.email}'s token above.`);
  } finally {
    await db.$disconnect();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
}
