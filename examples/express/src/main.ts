/** `pnpm start`: serve the API on PORT (default 3003) against DATABASE_URL (migrated: `pnpm db:deploy`). */
import { createDatabase } from './db.ts';
import { createApp } from './server.ts';

const databaseUrl = process.env.DATABASE_URL;
if (!databaseUrl) {
  console.error('Set DATABASE_URL (and run `pnpm db:deploy` once).');
  process.exit(1);
}
const port = Number(process.env.PORT ?? 3003);
const host = process.env.HOST ?? '127.0.0.1';
createApp(createDatabase(databaseUrl)).listen(port, host, () => {
  console.log(`notes API on http://${host}:${port}/notes`);
});
