/**
 * The part of an `etcd3` client (the npm package `etcd3`, 1.1.x) the etcd backend uses: the raw
 * KV and Lease services and the watch builder. Declared here by shape, so that `@fencelock/lock`
 * neither loads etcd3 nor names it in its types: a user without etcd has no etcd3 to install.
 * Integers of 64 bits (revisions, lease ids) travel as decimal strings, as etcd3 gives them.
 */

/** A key and what etcd knows of it. */
export interface EtcdKeyValue {
  readonly key: Buffer
  readonly value: Buffer
  /** The revision of the transaction that created the key: our fencing token. */
  readonly create_revision: string
  readonly mod_revision: string
  /** The lease the key is attached to; '0' for none. */
  readonly lease: string
}

export interface EtcdHeader {
  /** The store's revision when the call was served. */
  readonly revision: string
}

export interface EtcdRangeRequest {
  key: Buffer
  range_end?: Buffer
  limit?: number
  /** 0 none, 1 ascend, 2 descend. */
  sort_order?: number
  /** 0 key, 1 version, 2 create, 3 mod, 4 value. */
  sort_target?: number
  keys_only?: boolean
  count_only?: boolean
  max_create_revision?: string
}

export interface EtcdRangeResponse {
  readonly header: EtcdHeader
  readonly kvs: readonly EtcdKeyValue[]
  readonly count: string
}

export interface EtcdPutRequest {
  key: Buffer
  value?: Buffer
  lease?: string
  ignore_value?: boolean
}

export interface EtcdDeleteRequest {
  key: Buffer
  range_end?: Buffer
}

export interface EtcdCompare {
  /** 0 equal, 1 greater, 2 less, 3 not equal. */
  result: number
  /** 0 version, 1 create, 2 mod, 3 value, 4 lease. */
  target: number
  key: Buffer
  range_end?: Buffer
  create_revision?: string
  value?: Buffer
}

export interface EtcdRequestOp {
  request_range?: EtcdRangeRequest
  request_put?: EtcdPutRequest
  request_delete_range?: EtcdDeleteRequest
}

export interface EtcdResponseOp {
  readonly response_range?: EtcdRangeResponse
}

export interface EtcdTxnRequest {
  compare?: EtcdCompare[]
  success?: EtcdRequestOp[]
  failure?: EtcdRequestOp[]
}

export interface EtcdTxnResponse {
  readonly header: EtcdHeader
  readonly succeeded: boolean
  readonly responses: readonly EtcdResponseOp[]
}

/** etcd3's `KVClient`. */
export interface EtcdKv {
  range(request: EtcdRangeRequest): Promise<EtcdRangeResponse>
  txn(request: EtcdTxnRequest): Promise<EtcdTxnResponse>
}

/** etcd3's `LeaseClient`: the unary calls (keep-alives go through {@link EtcdLeaseHandle}). */
export interface EtcdLeaseService {
  leaseRevoke(request: { ID: string }): Promise<unknown>
  leaseTimeToLive(request: { ID: string; keys?: boolean }): Promise<{ readonly TTL: string }>
}

/** etcd3's `Lease`, made with `autoKeepAlive: false`: we keep it alive ourselves. */
export interface EtcdLeaseHandle {
  grant(): Promise<string>
  keepaliveOnce(): Promise<{ readonly TTL: string }>
  revoke(): Promise<void>
  on(event: 'lost', handler: (error: Error) => void): unknown
}

/** etcd3's `Watcher`. */
export interface EtcdWatcher {
  on(event: 'delete' | 'put', handler: (kv: EtcdKeyValue) => void): unknown
  on(event: 'error', handler: (error: Error) => void): unknown
  cancel(): Promise<void>
}

/** etcd3's `WatchBuilder`. */
export interface EtcdWatchBuilder {
  key(key: string | Buffer): EtcdWatchBuilder
  startRevision(revision: string): EtcdWatchBuilder
  create(): Promise<EtcdWatcher>
}

/**
 * An `Etcd3` client of the `etcd3` package, as the Locker uses it. Pass the client itself:
 * `new Locker(new Etcd3({ hosts }))`. The Locker never closes it.
 */
export interface EtcdClient {
  readonly kv: EtcdKv
  readonly leaseClient: EtcdLeaseService
  lease(ttlSeconds: number, options: { autoKeepAlive: boolean }): EtcdLeaseHandle
  watch(): EtcdWatchBuilder
}

/** Whether `value` looks like an `Etcd3` client (checked by shape: etcd3 is never imported here). */
export function isEtcdClient(value: unknown): value is EtcdClient {
  if (value == null || typeof value !== 'object') return false
  const v = value as Partial<Record<keyof EtcdClient, unknown>>
  const kv = v.kv as Partial<EtcdKv> | undefined
  const leases = v.leaseClient as Partial<EtcdLeaseService> | undefined
  return (
    typeof v.lease === 'function' &&
    typeof v.watch === 'function' &&
    typeof kv?.txn === 'function' &&
    typeof kv.range === 'function' &&
    typeof leases?.leaseTimeToLive === 'function'
  )
}
