export {
  Locker,
  type RedisClient,
  type NodeRedisClient,
  type NodeRedisSentinel,
  type NodeRedisCluster,
  type GlideClient,
  type GlideClusterClient,
  type SupportedRedisClient,
} from './locker.js'
export type { Lock } from './lock.js'
export {
  LockError,
  LockTimeoutError,
  LockLostError,
  LockUnavailableError,
  LockAbortedError,
  LockReplicationError,
  InvalidLockOptionError,
  LeadershipEndedError,
  type LockLostReason,
} from './errors.js'
export type { LockEvent, LockEventType } from './events.js'
export {
  LOCK_DEFAULTS,
  MAX_DURATION_MS,
  MAX_RESOURCE_BYTES,
  MIN_QUORUM_TTL_MS,
  type LockerOptions,
  type PubSubOption,
  type AcquireOptions,
  type TryAcquireOptions,
  type UsingOptions,
} from './options.js'
export { resourceKeys, type ResourceKeys } from './keys.js'
export {
  lockErrorHandler,
  lockErrorResponse,
  LOCK_ERROR_HANDLER_DEFAULTS,
  type LockErrorHandlerOptions,
  type LockErrorResponse,
  type LockErrorAnswer,
} from './lock-error-handler.js'
export { LOCK_SCRIPTS, type LockScriptName, type LockScriptSource } from './lock-scripts.js'
export type { Leadership } from './election/leadership.js'
export type { Schedule } from './election/run-once.js'
export {
  ELECTION_DEFAULTS,
  type LeadOptions,
  type DemotionReason,
  type RunOnceOptions,
  type Tick,
  type TickReport,
  type TickOutcome,
} from './election/election-options.js'
export type { LockInspection, NodeInspection } from './family/inspect.js'
export { MAX_RESOURCES, type MultiLock } from './family/multi-lock.js'
export { MAX_PERMITS, type Semaphore, type SemaphoreOptions, type SemaphoreInspection } from './family/semaphore.js'
export type { ReadWriteLock, ReadWriteOptions, ReadWriteInspection } from './family/read-write.js'
export type { ReadWriteHold, ReadWriteMode } from './family/read-write-hold.js'
