/**
 * Model-based test: random sequences of sends, retries, crashes (a request dying after its claim, after its
 * effect, or after completing), clock jumps (leases and retention) and cleanups, run on the real handler and
 * the in-memory store, and compared after every command with a model of the contract.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveOptions } from '../src/core/config.ts';
import { createMemoryStore } from './support/properties-memory-store.ts';
import { commandsArbitrary, type Mode, type Model, newModel, type Real } from './support/properties-model.ts';

const RUNS = Number(process.env.IDEM_PROPERTY_MODEL_RUNS ?? 300);
const SEED = Number(process.env.IDEM_PROPERTY_SEED ?? 20_260_101);
// The memory store's lock wait gives up at once (below); a duplicate of a request running in this process waits
// for it in memory for as long as that (lockTimeoutMs), so both give up at once.
const options = resolveOptions({ leaseSeconds: 30, retentionSeconds: 120, lockTimeoutMs: 1 });

describe.each<Mode>(['external', 'transactional'])('%s mode: model-based', (mode) => {
  it('effects == completed intents (no duplicate, none lost); replays return the first response', async () => {
    let runs = 0;
    let commands = 0;
    const seen: Record<string, number> = {};
    await fc.assert(
      fc.asyncProperty(commandsArbitrary(options), async (cmds) => {
        const model: Model = newModel(mode, options);
        const real: Real = {
          mode,
          options,
          // A duplicate of a paused transaction gives up at once (lock_timeout): 409.
          store: createMemoryStore({ lockTimeout: async () => {} }),
          externalCharges: [],
          stalled: new Map(),
        };
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        runs += 1;
        commands += model.commands;
        for (const [kind, count] of Object.entries(model.seen)) seen[kind] = (seen[kind] ?? 0) + count;
      }),
      { numRuns: RUNS, seed: SEED },
    );
    console.log(
      `[properties] model/${mode}: ${runs} runs (seed ${SEED}), ${commands} commands, 0 divergences ` +
        `from the model; answers: ${JSON.stringify(seen)}`,
    );
    expect(runs).toBeGreaterThanOrEqual(RUNS);
  });
});
