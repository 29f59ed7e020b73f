/**
 * What `@fencelock/fencing` reports through its `onRejection` hook when the database refused a
 * write whose fencing token was older than the row's.
 *
 * Declared here, structurally identical to `@fencelock/fencing`'s `FencingRejection`, until that
 * package has a build to take the type from; the type test in test/fencing-rejection.test.ts
 * checks the two stay assignable both ways once it has.
 */
export interface FencingRejection {
  /** The Prisma model of the rejected write, e.g. `Product`. */
  model: string
  /** The Prisma operation, e.g. `update`. */
  operation: string
  /** The token the write carried. */
  token: bigint
  /** The token the row held, when the row exists. */
  storedToken: bigint | undefined
}
