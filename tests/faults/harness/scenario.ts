/** Shared plumbing for the fault tests and the soak: a product of our own, intents, armed environments. */
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { generateApiToken, hashApiToken } from '@idem/db';
import { demoUsers } from '@idem/dev-db/seed-data';
import type { Cluster, FaultEnv } from './cluster.ts';
import type { CartInput } from './load.ts';

export const TOKEN = demoUsers[0]?.token ?? '';

/** The stock a scenario's product starts with: far more than any run orders. */
export const SCENARIO_STOCK = 10_000_000;

export interface Scenario {
  sku: string;
  /** A new intent: a unique email address (the checker groups orders by it). */
  intent(): string;
  input(intent: string): CartInput;
  /**
   * API tokens of principals of this scenario's own, to spread parallel keys over (the library caps the keys one
   * principal may have in flight: 20 by default, 429 past it).
   */
  tokens: string[];
  /** The token for the i-th parallel client. */
  tokenFor(index: number): string;
}

export async function createScenario(cluster: Cluster, tag: string, principals = 5): Promise<Scenario> {
  const run = randomUUID().slice(0, 8);
  const sku = `FAULT-${tag.toUpperCase()}-${run.toUpperCase()}`;
  await cluster.db.product.create({
    data: {
      sku,
      name: `Fault item ${run}`,
      description: 'fault tests',
      priceCents: 1_000,
      stock: SCENARIO_STOCK,
    },
  });
  const tokens: string[] = [];
  for (let index = 0; index < principals; index += 1) {
    const token = generateApiToken();
    const user = await cluster.db.user.create({
      data: { email: `p${index}-${run}@${tag}.faults.example`, name: `Fault principal ${index}` },
    });
    await cluster.db.apiToken.create({
      data: { userId: user.id, label: 'fault tests', tokenHash: hashApiToken(token) },
    });
    tokens.push(token);
  }
  let next = 0;
  return {
    tokens,
    tokenFor: (index) => tokens[index % tokens.length] ?? TOKEN,
    sku,
    intent: () => {
      next += 1;
      return `i${next}-${run}@${tag}.faults.example`;
    },
    input: (email) => ({ items: [{ sku, quantity: 1 }], email, cardToken: 'tok_visa' }),
  };
}

/** The env that arms a fault point once: it fires the first time it is reached, then never again. */
export function armedOnce(point: 'after-claim' | 'before-complete' | 'after-complete', extra: FaultEnv = {}) {
  return {
    IDEM_FAULT_POINT: point,
    IDEM_FAULT_ONCE: path.join(os.tmpdir(), `idem-fault-${point}-${randomUUID()}`),
    ...extra,
  };
}
