/**
 * What `@fencelock/fencing` hands its `onRejection` hook when the database refused a write whose
 * fencing token was older than the row's: the fields this package reads. Declared here rather
 * than imported, so a project without the fencing package compiles against these types; the
 * fencing package's own `FencingRejection` is assignable to it (test/fencing-rejection.test.ts).
 */
export interface FencingRejection {
  /** The Prisma model, e.g. `Product`: the `model` label. */
  readonly model: string
  /** The refused operation, e.g. `update`. */
  readonly operation: string
  /** The caller's stale token. */
  readonly token: bigint
  /** The newer token stored on the row, when it could be read. */
  readonly storedToken: bigint | undefined
}
