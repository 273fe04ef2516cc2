/**
 * The rule every app applies to a secret it is given in production (API keys, webhook and session secrets):
 * none, the public demo value or a short one is refused, so a deployment never signs or verifies with a value
 * anyone can read in this repository.
 */
export const MIN_SECRET_LENGTH = 32;

/** What is wrong with `value` as the production value of `name`, or undefined when nothing is. */
export function productionSecretProblem(name: string, value: string, demoValue: string): string | undefined {
  if (value === demoValue) return `${name} is the public demo value; set a secret of your own`;
  if (value.length < MIN_SECRET_LENGTH) return `${name} must be at least ${MIN_SECRET_LENGTH} characters`;
  return undefined;
}

/** What a missing production secret is told. */
export const missingProductionSecret = (name: string) =>
  `${name} is required in production (pnpm start generates one into .data/)`;
