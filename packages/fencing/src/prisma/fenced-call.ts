/** One fenced call: the client it goes to, the model and its fence column, the token it fences with. */
import type { DataModel } from './data-model.js'
import { delegateKey } from './data-model.js'
import type { ResolvedFencingOptions } from './options.js'

/** What one `$fenced(token)` client carries to its writes. */
export interface FenceScope {
  readonly token: bigint
  readonly options: ResolvedFencingOptions
  /** `undefined` when the client carries no runtime data model we understand: then every check fails closed. */
  readonly dataModel: DataModel | undefined
  /** Delegate property (`product`) → model name (`Product`), for every model whose writes a fenced client looks at. */
  readonly delegates: ReadonlyMap<string, string>
}

/** The Prisma operations that write. Reads pass through every fenced client untouched. */
export const WRITE_OPERATIONS: ReadonlySet<string> = new Set([
  'create',
  'createMany',
  'createManyAndReturn',
  'update',
  'updateMany',
  'updateManyAndReturn',
  'upsert',
  'delete',
  'deleteMany',
])

/** One fenced call: where it goes and what it fences with. */
export interface Call {
  /** The caller's client or transaction client (not the fenced view). */
  readonly client: object
  readonly model: string
  /** The model's fence column. */
  readonly field: string
  readonly operation: string
  readonly scope: FenceScope
}

/** Calls `delegate[operation](args)` with the delegate as `this`, as Prisma expects. */
export function invoke(delegate: object, operation: string, args: unknown): Promise<unknown> {
  const fn = (delegate as Record<string, unknown>)[operation]
  if (typeof fn !== 'function') throw new TypeError(`this Prisma client has no ${operation}()`)
  return Reflect.apply(fn, delegate, [args]) as Promise<unknown>
}

export function delegateOf(client: object, model: string): object {
  const delegate = (client as Record<string, unknown>)[delegateKey(model)]
  if (delegate === null || typeof delegate !== 'object') throw new TypeError(`this Prisma client has no model ${model}`)
  return delegate
}
