export { fencing } from './extension.js'
export {
  fencedTransaction,
  type FencedClient,
  type TransactionClientOf,
  type ModelNameOf,
  type WhereUniqueOf,
  type RowOf,
} from './fenced-transaction.js'
export { withFenceToken, currentFenceToken } from './ambient-token.js'
export {
  fenceGuardSql,
  fenceGuardUpgradeSql,
  fenceGuardObjects,
  FENCE_GUARD_SQLSTATE,
  FENCE_TOKEN_SETTING,
  type FenceGuardOptions,
  type FenceGuardObjects,
} from './fence-guard.js'
export { fenceGuardPrismaModel } from './tombstone-model.js'
export { assertFenceGuard, type AssertFenceGuardOptions } from './assert-fence-guard.js'
export { isFenceGuardError } from './guard-error.js'
export {
  fencingHeaders,
  readFencingHeaders,
  FENCING_TOKEN_HEADER,
  FENCING_RESOURCE_HEADER,
  MAX_FENCING_RESOURCE_BYTES,
  type FencingClaim,
  type TokenHolder,
  type HeaderReader,
} from './fencing-headers.js'
export { withFencedResource, type FencedResourceOptions } from './fenced-resource.js'
export {
  fencingMiddleware,
  fencingErrorHandler,
  fencingErrorResponse,
  type FencingMiddlewareOptions,
  type FencedRequest,
  type FencingRequest,
  type FencingResponse,
  type FencingNext,
} from './fencing-middleware.js'
export { parseFenceToken, MAX_FENCE_TOKEN, type FenceTokenInput } from './fence-token.js'
export {
  FencingError,
  StaleFencingTokenError,
  InvalidFenceTokenError,
  MissingFenceTokenError,
  UnsupportedFencedWriteError,
  InvalidFencingOptionError,
  InvalidFencingHeaderError,
  MissingFenceGuardError,
  type MissingGuardObject,
  type UnsupportedFencedWriteReason,
} from './errors.js'
export {
  FENCING_DEFAULTS,
  type FencingOptions,
  type FencingRejection,
  type FencedTransactionOptions,
  type FencedModels,
  type FencedModelNames,
  type FencedModelNameOf,
  type FencedMethod,
  type NoFenceColumn,
  type ClientModelName,
  type BigIntFieldOf,
} from './options.js'
export type { TransactionLimits } from './fenced-transaction.js'
