/**
 * The median every figure is taken as (of the per-run or per-round figures), and the rotation that gives each
 * peers contender every position in the round order.
 */
import { describe, expect, it } from 'vitest';
import { median, rotate } from '../src/stats.ts';

describe('median', () => {
  it('is the middle value of an odd count, whatever the input order', () => {
    expect(median([9, 1, 5])).toBe(5);
  });

  it('is the mean of the two middle values of an even count', () => {
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });

  it('ignores values that are not finite (a failed round)', () => {
    expect(median([Number.NaN, 7, Number.POSITIVE_INFINITY, 3])).toBe(5);
  });

  it('is NaN when no round produced a figure', () => {
    expect(median([])).toBeNaN();
    expect(median([Number.NaN])).toBeNaN();
  });
});

describe('rotate', () => {
  it('shifts left by the round number, wrapping around', () => {
    expect(rotate(['a', 'b', 'c'], 1)).toEqual(['b', 'c', 'a']);
    expect(rotate(['a', 'b', 'c'], 4)).toEqual(['b', 'c', 'a']);
  });

  it('puts every item first exactly once over as many rounds as items', () => {
    const items = ['a', 'b', 'c', 'd'];
    const firsts = items.map((_, round) => rotate(items, round)[0]);
    expect(firsts).toEqual(items);
  });

  it('leaves the input untouched and handles an empty list', () => {
    const items = ['a', 'b'];
    rotate(items, 1);
    expect(items).toEqual(['a', 'b']);
    expect(rotate([], 3)).toEqual([]);
  });
});
