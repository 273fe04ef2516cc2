/** src/jobs/keyset-pages.ts: every row once, in key order, each page after the last key of the one before. */
import { describe, expect, it } from 'vitest';
import { forEachInKeysetPages } from '../src/jobs/keyset-pages.ts';

/** Sweeps the numbers 1..count in pages of `pageSize`, recording each page asked for and each row visited. */
async function sweep(count: number, pageSize: number) {
  const rows = Array.from({ length: count }, (_, index) => index + 1);
  const asked: number[] = [];
  const visited: number[] = [];
  await forEachInKeysetPages({
    start: 0,
    pageSize,
    readPage: async (after) => {
      asked.push(after);
      return rows.filter((row) => row > after).slice(0, pageSize);
    },
    keyOf: (row) => row,
    visit: async (row) => {
      visited.push(row);
    },
  });
  return { asked, visited };
}

describe('forEachInKeysetPages', () => {
  it('visits every row once, in order, page after page, and stops at a short page', async () => {
    expect(await sweep(5, 2)).toEqual({ asked: [0, 2, 4], visited: [1, 2, 3, 4, 5] });
  });

  it('reads one more (empty) page when the last page is full', async () => {
    expect(await sweep(4, 2)).toEqual({ asked: [0, 2, 4], visited: [1, 2, 3, 4] });
  });

  it('reads one page when there is nothing to visit', async () => {
    expect(await sweep(0, 2)).toEqual({ asked: [0], visited: [] });
  });

  it('visits a page’s rows before it reads the next page', async () => {
    const events: string[] = [];
    await forEachInKeysetPages({
      start: 0,
      pageSize: 1,
      readPage: async (after) => {
        events.push(`read after ${after}`);
        return after < 2 ? [after + 1] : [];
      },
      keyOf: (row) => row,
      visit: async (row) => {
        events.push(`visit ${row}`);
      },
    });
    expect(events).toEqual(['read after 0', 'visit 1', 'read after 1', 'visit 2', 'read after 2']);
  });
});
