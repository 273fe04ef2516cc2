/**
 * QUEUE_URL and QUEUE_NAMESPACE, read the same way by the web app (which then writes fulfilment to the outbox)
 * and the worker (which relays and consumes it). Unset QUEUE_URL: fulfilment stays on pg-boss.
 */
import { z } from 'zod';
import { brokerNames, DEFAULT_NAMESPACE } from './names.ts';
import { brokerKindOf } from './queue-url.ts';

const blankIsUnset = (value: unknown) => (value === '' ? undefined : value);

function refusal(check: () => unknown): string | undefined {
  try {
    check();
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

export const queueEnvShape = {
  QUEUE_URL: z.preprocess(
    blankIsUnset,
    z
      .string()
      .superRefine((value, context) => {
        const message = refusal(() => brokerKindOf(value));
        if (message) context.addIssue({ code: 'custom', message });
      })
      .optional(),
  ),
  QUEUE_NAMESPACE: z.preprocess(
    blankIsUnset,
    z
      .string()
      .superRefine((value, context) => {
        const message = refusal(() => brokerNames(value));
        if (message) context.addIssue({ code: 'custom', message });
      })
      .default(DEFAULT_NAMESPACE),
  ),
};

export interface QueueEnv {
  QUEUE_URL?: string | undefined;
  QUEUE_NAMESPACE: string;
}

/** The broker settings, or undefined when fulfilment stays on pg-boss. */
export function queueSettingsOf(env: QueueEnv): { url: string; namespace: string } | undefined {
  return env.QUEUE_URL ? { url: env.QUEUE_URL, namespace: env.QUEUE_NAMESPACE } : undefined;
}
