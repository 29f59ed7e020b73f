/**
 * The client `db.$fenced(token)` returns: a view of the caller's client (or transaction client)
 * in which the write methods of the model delegates are fenced. It holds no connection and no
 * state but the token, so making one per call is cheap; every call goes to the wrapped client.
 */
import { delegateKey, type DataModel } from './data-model.js'
import { WRITE_OPERATIONS, type FenceScope } from './fenced-call.js'
import { fencedWritePlan, refusedPlan } from './fenced-write.js'
import { checkUnfencedWrite } from './write-arguments.js'
import { FLUENT_OPERATIONS, fluentWrite } from './fluent-write.js'
import { lazyWrite } from './lazy-write.js'
import { RAW_METHODS, rawUnderToken } from './fenced-raw.js'
import type { ResolvedFencingOptions } from './options.js'

/** Where a fenced client keeps what it fences with; read by `fencedTransaction`. */
export const FENCE_SCOPE: unique symbol = Symbol('@fencelock/fencing scope')

/** The scope of a client returned by `$fenced`, or `undefined` for any other value. */
export function fenceScopeOf(client: unknown): FenceScope | undefined {
  if (client === null || typeof client !== 'object') return undefined
  return (client as { [FENCE_SCOPE]?: FenceScope })[FENCE_SCOPE]
}

/**
 * Delegate property → model name for the models a fenced client wraps: the fenced ones, and
 * (with a data model) all others too, whose writes are checked for nested writes into fenced ones.
 */
export function delegatesOf(options: ResolvedFencingOptions, dataModel: DataModel | undefined): ReadonlyMap<string, string> {
  const delegates = new Map<string, string>()
  for (const model of options.models.keys()) delegates.set(delegateKey(model), model)
  if (dataModel !== undefined) for (const model of dataModel.keys()) delegates.set(delegateKey(model), model)
  return delegates
}

/**
 * Prisma's own client methods: they run on the wrapped client itself (its raw methods, under the
 * view's token: fenced-raw.ts). Every other method — a
 * client method of a user's extension, which reaches the client through
 * `Prisma.getExtensionContext(this)` — runs with the fenced view as `this`, so what it writes
 * through the view is fenced. (`$fenced` of a view is a view of the client with the new token.)
 */
const CLIENT_OWN_METHODS: ReadonlySet<string> = new Set([
  '$connect',
  '$disconnect',
  '$on',
  '$use',
  '$runCommandRaw',
  '$metrics',
  '$applyPendingMigrations',
  '$fenced',
])

/** Wraps `client` (a Prisma client or transaction client) so its writes carry `scope.token`. */
export function fenceClient<T extends object>(client: T, scope: FenceScope): T {
  const delegates = new Map<string, object>()
  return new Proxy(client, {
    get(target, prop, receiver) {
      if (prop === FENCE_SCOPE) return scope
      if (typeof prop === 'string') {
        const cached = delegates.get(prop)
        if (cached !== undefined) return cached
        const model = scope.delegates.get(prop) ?? (scope.dataModel === undefined ? guessModel(target, prop) : undefined)
        if (model !== undefined) {
          const delegate = Reflect.get(target, prop) as unknown
          if (delegate !== null && typeof delegate === 'object') {
            const fenced = fenceDelegate(target, delegate, model, scope)
            delegates.set(prop, fenced)
            return fenced
          }
          return delegate
        }
        if (prop === '$transaction') {
          const transaction = Reflect.get(target, prop) as unknown
          if (typeof transaction !== 'function') return transaction
          // The interactive form hands out a fenced transaction client, so `db.$fenced(t)
          // .$transaction(async (tx) => ...)` fences inside too. The array form passes through:
          // its fenced elements are lazy writes that join the batch (or refuse, see lazy-write.ts).
          return (arg: unknown, options?: unknown) =>
            typeof arg === 'function'
              ? Reflect.apply(transaction, target, [(tx: object) => (arg as (tx: object) => unknown)(fenceClient(tx, scope)), options])
              : Reflect.apply(transaction, target, [arg, options])
        }
        if (prop === '$extends') {
          const extend = Reflect.get(target, prop) as unknown
          if (typeof extend !== 'function') return extend
          // A client extended from a view is a view too: `db.$fenced(t).$extends(...)` writes under t.
          return (...args: unknown[]) => fenceClient(Reflect.apply(extend, target, args) as object, scope)
        }
      }
      const value = Reflect.get(target, prop) as unknown
      if (typeof value !== 'function') return value
      if (typeof prop === 'string' && RAW_METHODS.has(prop)) return (...args: unknown[]) => rawUnderToken(target, prop, args, scope.token)
      const self = typeof prop === 'string' && CLIENT_OWN_METHODS.has(prop) ? target : receiver
      return (value as (...args: unknown[]) => unknown).bind(self)
    },
  })
}

/**
 * Without a data model we do not know the client's models; a property holding an object with
 * Prisma's delegate methods is taken for one (an unfenced one, unless it is in `models`), so
 * its writes are still checked for nested writes instead of passing unchecked.
 */
function guessModel(client: object, prop: string): string | undefined {
  if (prop.startsWith('$') || prop.startsWith('_')) return undefined
  const value = Reflect.get(client, prop) as unknown
  if (value === null || typeof value !== 'object') return undefined
  const d = value as Record<string, unknown>
  return typeof d.findFirst === 'function' && typeof d.create === 'function' ? prop.charAt(0).toUpperCase() + prop.slice(1) : undefined
}

function fenceDelegate(client: object, delegate: object, model: string, scope: FenceScope): object {
  const field = scope.options.models.get(model)
  const methods = new Map<string, (args?: unknown) => unknown>()
  return new Proxy(delegate, {
    get(target, prop, receiver) {
      if (typeof prop === 'string' && WRITE_OPERATIONS.has(prop)) {
        let method = methods.get(prop)
        if (method === undefined) {
          method =
            field !== undefined
              ? FLUENT_OPERATIONS.has(prop)
                ? (args) => fluentWrite(fencedWritePlan(client, model, field, prop, args, scope), model, scope.dataModel, (select) => fencedWritePlan(client, model, field, prop, withSelect(args, select), scope))
                : (args) => lazyWrite(fencedWritePlan(client, model, field, prop, args, scope))
              : (args) => {
                  // Not fenced: the untouched Prisma call (still a lazy PrismaPromise, fit for
                  // the array form of $transaction), unless it would write a fenced model.
                  try {
                    checkUnfencedWrite(model, prop, args, scope)
                  } catch (error) {
                    return lazyWrite(refusedPlan(error))
                  }
                  return Reflect.apply(Reflect.get(target, prop) as (args: unknown) => unknown, target, [args])
                }
          methods.set(prop, method)
        }
        return method
      }
      const value = Reflect.get(target, prop) as unknown
      // Bound to the fenced delegate: a model method of a user's extension reaches the delegate
      // through `Prisma.getExtensionContext(this)`, and its writes are then the fenced ones.
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(receiver) : value
    },
  })
}

/** The call's arguments with `select` in place of its `select`, `include` and `omit`. */
function withSelect(args: unknown, select: Record<string, unknown> | undefined): unknown {
  if (select === undefined || args === null || typeof args !== 'object') return args
  const { select: _select, include: _include, omit: _omit, ...rest } = args as Record<string, unknown>
  return { ...rest, select }
}
