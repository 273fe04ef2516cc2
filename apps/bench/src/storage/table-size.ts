/** How big a table is on disk: heap, TOAST, each index, and the bytes that one row costs in all. */
import type pg from 'pg';

export interface TableSize {
  rows: number;
  totalBytes: number;
  heapBytes: number;
  toastBytes: number;
  indexBytes: Record<string, number>;
  /** Total relation size (heap + TOAST + every index) / rows. */
  bytesPerRow: number;
}

export async function measureTableSize(client: pg.Client, table: string): Promise<TableSize> {
  const { rows: totals } = await client.query<{
    rows: string;
    total: string;
    heap: string;
    toast: string;
  }>(
    `select (select count(*) from ${table}) as rows,
            pg_total_relation_size($1::regclass) as total,
            pg_relation_size($1::regclass) as heap,
            coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0) as toast
     from pg_class c where c.oid = $1::regclass`,
    [table],
  );
  const { rows: indexes } = await client.query<{ name: string; bytes: string }>(
    `select indexrelid::regclass::text as name, pg_relation_size(indexrelid) as bytes
     from pg_index where indrelid = $1::regclass order by 1`,
    [table],
  );
  const total = totals[0];
  const rows = Number(total?.rows ?? 0);
  const totalBytes = Number(total?.total ?? 0);
  return {
    rows,
    totalBytes,
    heapBytes: Number(total?.heap ?? 0),
    toastBytes: Number(total?.toast ?? 0),
    indexBytes: Object.fromEntries(indexes.map((index) => [index.name, Number(index.bytes)])),
    bytesPerRow: rows > 0 ? totalBytes / rows : Number.NaN,
  };
}

export function formatBytes(bytes: number): string {
  if (bytes >= 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
  if (bytes >= 1024 ** 2) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(0)} KiB`;
  return `${bytes} B`;
}
