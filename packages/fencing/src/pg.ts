/**
 * `@fencelock/fencing/pg`: fencing for any client that speaks to PostgreSQL through `pg` (raw SQL,
 * Drizzle, Kysely, TypeORM, ...). No Prisma here: the database guard (`fenceGuardSql`) does the
 * fencing, reading the transaction's token (`fencelock.token`) in its triggers.
 */
export { withFence, type FenceConnection } from './pg/with-fence.js'
export {
  FENCE_TOKEN_SETTING,
  FENCE_TXID_SETTING,
  SET_FENCE_TOKEN_SQL,
  FENCE_TOKEN_SCOPE_SQLSTATE,
  FENCE_CASCADE_SQLSTATE,
  FENCE_STRICT_SQLSTATE,
  FENCE_NO_TOKEN_PATH_SQLSTATE,
  FENCE_GUARD_SQLSTATE,
} from './guard/protocol.js'
export { isFenceGuardError } from './guard/refusal.js'
export {
  StaleFencingTokenError,
  InvalidFenceTokenError,
  InvalidFencingOptionError,
  FencingError,
  FenceTransactionLostError,
  UnsupportedFencedWriteError,
  type FenceTransactionLostReason,
} from './shared/errors.js'
export type { FenceTokenInput } from './shared/fence-token.js'
