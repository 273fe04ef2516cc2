/** The pgbench floor's script: the store's recorded statements, bound for pgbench, in the fast path's round trips. */
import { describe, expect, it } from 'vitest';
import { recordedStatements } from '../src/profile/recorded-statements.ts';
import { BASELINE_SCRIPT, bareScript, idemScript } from '../src/sections/pgbench-floor.ts';

describe('idemScript', () => {
  it("binds the store's own statements, every key new, BEGIN with the claim and the completion with the COMMIT", async () => {
    const statements = await recordedStatements();
    const script = idemScript(statements);
    // No parameter left: pgbench's prepared mode numbers its own (:n, :k).
    expect(script).not.toMatch(/\$\d/);
    // The store's claim, not a copy: its insert … on conflict on the primary key, minus its label comment.
    expect(statements.claim).toContain('/* idem:claim */');
    expect(script).not.toContain('/* idem:');
    expect(script).toContain('on conflict (scope, procedure, key) do nothing');
    expect(script).toContain(`'pgbench', 'bench.protected', 'k' || :k`);
    // A text parameter with quotes inside (the stored response) stays one SQL literal.
    expect(script).toContain(`response = '{"kind":"output"`);
    const lines = script.split('\n');
    const at = (text: string) => lines.findIndex((line) => line.startsWith(text));
    expect(lines.slice(2, 4)).toEqual(['\\startpipeline', 'begin;']);
    expect(at('\\endpipeline')).toBeGreaterThan(at('begin;'));
    expect(at('insert into bench_effects')).toBeGreaterThan(at('\\endpipeline'));
    // The last round trip: the completion, then the COMMIT, under one pipeline.
    const last = lines.lastIndexOf('\\startpipeline');
    expect(lines[last + 1]).toMatch(/^update "idempotency_keys" set state = 'completed'/);
    expect(lines.slice(-3)).toEqual(['commit;', '\\endpipeline', '']);
  });

  it("writes the bare record with the claim's own values and the completion's response", async () => {
    const statements = await recordedStatements();
    const bare = bareScript(statements);
    const idem = idemScript(statements);
    expect(bare).not.toMatch(/\$\d/);
    const [, , , fingerprint, , owner] = statements.claimParams('', '', '');
    expect(bare).toContain(`'${String(fingerprint)}', 'completed', '${String(owner)}'::uuid`);
    expect(bare).toContain(`set response = '{"kind":"output"`);
    // The same round trips as Idem's: the same script around other statements.
    const shape = (script: string) =>
      script.split('\n').filter((line) => /^(\\|begin|commit|insert into bench)/.test(line));
    expect(shape(bare)).toEqual(shape(idem));
  });

  it('times the insert alone as Prisma sends it: BEGIN, insert, COMMIT, one round trip each', () => {
    expect(BASELINE_SCRIPT).toBe(
      '\\set n random(1, 1000000)\nbegin;\ninsert into bench_effects (n) values (:n) returning id, at;\ncommit;\n',
    );
  });
});
