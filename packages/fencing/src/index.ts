export { fencing } from './extension.js'
export {
  fencedTransaction,
  type FencedClient,
  type TransactionClientOf,
  type ModelNameOf,
  type WhereUniqueOf,
} from './fenced-transaction.js'
export { withFenceToken, currentFenceToken } from './ambient-token.js'
export { fenceGuardSql, fenceGuardObjects, FENCE_GUARD_SQLSTATE, type FenceGuardOptions, type FenceGuardObjects } from './fence-guard.js'
export { isFenceGuardError } from './guard-error.js'
export { parseFenceToken, MAX_FENCE_TOKEN, type FenceTokenInput } from './fence-token.js'
export {
  FencingError,
  StaleFencingTokenError,
  InvalidFenceTokenError,
  MissingFenceTokenError,
  UnsupportedFencedWriteError,
  InvalidFencingOptionError,
  type UnsupportedFencedWriteReason,
} from './errors.js'
export {
  FENCING_DEFAULTS,
  type FencingOptions,
  type FencingRejection,
  type FencedTransactionOptions,
} from './options.js'
