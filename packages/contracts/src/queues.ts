/** Every pg-boss queue the apps use: the web app sends to them, the worker creates and works them. */
export const Queue = {
  fulfilment: 'fulfilment',
  cleanup: 'idem-cleanup',
  reconcile: 'payments-reconcile',
} as const;

export type QueueName = (typeof Queue)[keyof typeof Queue];
