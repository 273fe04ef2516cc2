/** Failure codes this shop stores on a failed payment besides the issuer's own decline codes. */
export const PaymentFailureCode = {
  /** The provider refused to attempt the charge: an unknown or invalid card token. */
  invalidSource: 'invalid_source',
  /** The provider refused the request for another final reason (a 4xx that is ours to fix): nothing charged. */
  rejected: 'provider_rejected',
  /** No charge ever reached the provider and the reconciler gave the order up: nothing was charged. */
  abandoned: 'abandoned',
} as const;
