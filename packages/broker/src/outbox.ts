/**
 * @idem/broker/outbox — what the web app needs to put fulfilment on a broker: the environment and the outbox.
 * No broker client is imported from here: the web app writes rows, the worker does the talking.
 */
export { type QueueEnv, queueEnvShape, queueSettingsOf } from './env.ts';
export {
  FulfilmentMessage,
  type FulfilmentMessageHops,
  type FulfilmentOutbox,
  fulfilmentOutbox,
  MESSAGE_LIVE_SECONDS,
} from './fulfilment-messages.ts';
