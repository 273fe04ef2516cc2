/**
 * Whose checkout intent a browser holds. The intent (its key and, while in doubt, the payment it sent: cart and
 * email) lives in localStorage, which outlives a session: on a shared computer, after a sign-in or a cleared
 * cookie, the next person would be shown the previous one's payment in doubt and email. The checkout names its
 * intent after this owner, so each principal finds only its own. A keyed hash: the page carries no session id.
 */
import { createHmac } from 'node:crypto';
import type { Principal } from './principal.ts';

export function intentOwnerOf(principal: Principal | null, secret: string): string {
  if (!principal) return 'nobody';
  return createHmac('sha256', secret)
    .update(`checkout-intent-owner\0${principal.id}`)
    .digest('hex')
    .slice(0, 16);
}
