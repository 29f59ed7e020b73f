export { fencing } from './prisma/extension.js'
export {
  fencedTransaction,
  type FencedClient,
  type TransactionClientOf,
  type ModelNameOf,
  type WhereUniqueOf,
  type RowOf,
} from './prisma/fenced-transaction.js'
export { withFenceToken, currentFenceToken } from './shared/ambient-token.js'
export { fenceGuardSql, fenceGuardUpgradeSql, fenceGuardObjects, type FenceGuardOptions, type FenceGuardObjects } from './guard/fence-guard.js'
export {
  FENCE_GUARD_SQLSTATE,
  FENCE_TOKEN_SETTING,
  FENCE_TXID_SETTING,
  FENCE_TOKEN_SCOPE_SQLSTATE,
  FENCE_CASCADE_SQLSTATE,
  FENCE_STRICT_SQLSTATE,
  FENCE_NO_TOKEN_PATH_SQLSTATE,
  SET_FENCE_TOKEN_SQL,
} from './guard/protocol.js'
export { fenceGuardPrismaModel } from './guard/tombstone-model.js'
export { assertFenceGuard, type AssertFenceGuardOptions } from './prisma/assert-fence-guard.js'
export { isFenceGuardError } from './guard/refusal.js'
export {
  fencingHeaders,
  readFencingHeaders,
  FENCING_TOKEN_HEADER,
  FENCING_RESOURCE_HEADER,
  MAX_FENCING_RESOURCE_BYTES,
  type FencingClaim,
  type TokenHolder,
  type HeaderReader,
} from './http/fencing-headers.js'
export { withFencedResource, type FencedResourceOptions } from './http/fenced-resource.js'
export {
  fencingMiddleware,
  fencingErrorHandler,
  fencingErrorResponse,
  type FencingMiddlewareOptions,
  type FencedRequest,
  type FencingRequest,
  type FencingResponse,
  type FencingNext,
} from './http/fencing-middleware.js'
export { parseFenceToken, MAX_FENCE_TOKEN, type FenceTokenInput } from './shared/fence-token.js'
export {
  FencingError,
  StaleFencingTokenError,
  InvalidFenceTokenError,
  MissingFenceTokenError,
  UnsupportedFencedWriteError,
  InvalidFencingOptionError,
  InvalidFencingHeaderError,
  MissingFenceGuardError,
  FenceTransactionLostError,
  type FenceTransactionLostReason,
  type MissingGuardObject,
  type UnsupportedFencedWriteReason,
} from './shared/errors.js'
export {
  FENCING_DEFAULTS,
  type FencingOptions,
  type FencedWriteReport,
  type FencingRejection,
  type FencedTransactionOptions,
  type FencedModels,
  type FencedModelNames,
  type FencedModelNameOf,
  type FencedMethod,
  type NoFenceColumn,
  type ClientModelName,
  type BigIntFieldOf,
} from './prisma/options.js'
export type { TransactionLimits } from './prisma/fenced-transaction.js'
