/**
 * What the provider's record says about one order: the truth about its money once every key is forgotten.
 * Only a charge for the order's own amount and currency, and not refunded, counts as paying for it; any other
 * succeeded charge (a refunded one included: someone gave the money back while the order waited) is an anomaly
 * for a human — never a reason to ship, never a reason to release the stock.
 */
import type { Charge } from './provider-client.ts';

export type ProviderAnswer =
  | { kind: 'charged'; charge: Charge }
  | { kind: 'declined'; charge: Charge }
  | { kind: 'none' }
  | { kind: 'anomaly'; charge: Charge };

export function answerFromCharges(
  order: { totalCents: number; currency: string },
  charges: Charge[],
): ProviderAnswer {
  const pays = (charge: Charge) =>
    !charge.refunded &&
    charge.amount === order.totalCents &&
    charge.currency.toLowerCase() === order.currency.toLowerCase();
  const succeeded = charges.filter((charge) => charge.status === 'succeeded');
  const paid = succeeded.find(pays);
  if (paid) return { kind: 'charged', charge: paid };
  const [odd] = succeeded;
  if (odd) return { kind: 'anomaly', charge: odd };
  const declined = charges.findLast((charge) => charge.status === 'failed');
  return declined ? { kind: 'declined', charge: declined } : { kind: 'none' };
}
