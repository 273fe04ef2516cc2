/** `pnpm start`: serve the API on PORT (default 3001) against DATABASE_URL (migrated: `prisma migrate deploy`). */
import { createDatabase } from './db.ts';
import { createServer } from './server.ts';

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) {
  console.error('Set DATABASE_URL (and run `pnpm exec prisma migrate deploy` once).');
  process.exit(1);
}
const port = Number(process.env.PORT ?? 3001);
const host = process.env.HOST ?? '127.0.0.1';
createServer(createDatabase(databaseUrl)).listen(port, host, () => {
  console.log(`notes API on http://${host}:${port}/trpc/notes.create`);
});
