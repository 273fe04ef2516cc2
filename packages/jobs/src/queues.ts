/** Every queue this app uses. Workers and senders create all of them at start (see `startJobQueue`). */
export const Queue = {
  fulfilment: 'fulfilment',
  cleanup: 'idem-cleanup',
  reconcile: 'payments-reconcile',
} as const;

export type QueueName = (typeof Queue)[keyof typeof Queue];
