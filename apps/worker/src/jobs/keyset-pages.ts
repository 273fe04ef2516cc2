/**
 * Keyset paging, for the reconciler's sweeps that must visit every row of a query in every run: each page starts
 * after the last row of the page before (in the query's key order) instead of at an offset, so no LIMIT leaves
 * the oldest rows behind and rows that change meanwhile never make a page skip one. A short page is the last.
 */

/** The smallest uuid: a key before every order id. */
export const NIL_UUID = '00000000-0000-0000-0000-000000000000';

export interface KeysetSweep<Row, Key> {
  /** A key before every row the sweep visits. */
  start: Key;
  /** Rows a page holds at most; a page with fewer is the last. */
  pageSize: number;
  /** At most `pageSize` rows after `after`, in key order. */
  readPage(after: Key): PromiseLike<Row[]>;
  /** The key of a row, where the next page starts. */
  keyOf(row: Row): Key;
  /** Called for each row in order, one at a time; the next page is read once the page's rows are visited. */
  visit(row: Row): Promise<void>;
}

export async function forEachInKeysetPages<Row, Key>(sweep: KeysetSweep<Row, Key>): Promise<void> {
  let after = sweep.start;
  for (;;) {
    const page = await sweep.readPage(after);
    for (const row of page) await sweep.visit(row);
    const last = page.at(-1);
    if (!last || page.length < sweep.pageSize) return;
    after = sweep.keyOf(last);
  }
}
