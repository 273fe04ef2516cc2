/**
 * A configuration the server cannot run with; the message is one line, printed as-is at startup. Its own module,
 * so the startup check can recognise it when evaluating env.ts is what threw.
 */
export class EnvError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EnvError';
  }
}
