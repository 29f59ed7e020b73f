import { Prisma } from '@prisma/client/extension'
import { currentFenceToken } from '../shared/ambient-token.js'
import { delegateKey, readDataModel, type DataModel } from './data-model.js'
import { InvalidFencingOptionError, MissingFenceTokenError } from '../shared/errors.js'
import { parseFenceToken, type FenceTokenInput } from '../shared/fence-token.js'
import { delegatesOf, fenceClient } from './fenced-client.js'
import { WRITE_OPERATIONS } from './fenced-call.js'
import { checkSent } from './fenced-write.js'
import { resolveFencingOptions, type FencedMethod, type FencedModels, type FencingOptions, type ResolvedFencingOptions } from './options.js'

/**
 * The fencing extension: `prisma.$extends(fencing({ models }))` adds `$fenced(token?)` to the
 * client (and to the transaction clients it hands out).
 *
 * `db.$fenced(token)` returns the same client with conditional writes on the fenced models:
 * `update`, `updateMany`, `updateManyAndReturn`, `upsert`, `delete` and `deleteMany` add
 * `fence <= token` to the filter and set `fence = token` (a delete sets it, then deletes, so the
 * guard keeps the deleting token); `create`, `createMany` and `createManyAndReturn` set
 * `fence = token`. A refused write throws `StaleFencingTokenError` and keeps nothing of the call;
 * a missing row fails exactly as without the extension. What cannot be fenced (`limit`, nested
 * writes into fenced models, arguments that are not objects, a `deleteMany` filter on the fence)
 * is refused with `UnsupportedFencedWriteError` before any query. With the database guard
 * (`fenceGuardSql`) installed, its refusals become `StaleFencingTokenError` too. Reads, unfenced models and everything
 * written outside `$fenced` pass through untouched. Without an argument, `$fenced()` uses the
 * token of the enclosing `withFenceToken`.
 *
 * Options are checked here, before any client exists; the models and their fence columns are
 * checked against the client when the extension is applied. With the client's type,
 * `fencing<typeof prisma>(...)`, a model or field name the schema does not have (or a field that is
 * not `BigInt`) is a type error already.
 *
 * @example
 * ```ts
 * const prisma = new PrismaClient({ adapter })
 * const db = prisma.$extends(fencing<typeof prisma>({ models: { Product: 'fenceToken', Order: 'fenceToken' }, onRejection: countIt }))
 * await db.$fenced(lock.token).product.update({ where: { sku }, data: { stock: { decrement: 1 } } })
 * ```
 */
export function fencing<C = unknown, const M extends FencedModels<C> = FencedModels<C>>(options: FencingOptions<C, M>) {
  const resolved = resolveFencingOptions(options)
  return Prisma.defineExtension((client) => {
    const dataModel = readDataModel(client as object)
    checkModels(client as object, resolved, dataModel)
    const delegates = delegatesOf(resolved, dataModel)
    /**
     * This client (or transaction client) with its writes to fenced models made
     * conditional on `token`. Throws `InvalidFenceTokenError` for a bad token, and
     * `MissingFenceTokenError` without one outside `withFenceToken`, before any query.
     * Fenced writes are lazy like Prisma's own calls: nothing runs until they are awaited,
     * and a one-statement write can be an element of `$transaction([...])` (a write of
     * several statements refuses there, before the batch starts).
     */
    function $fenced<T extends object>(this: T, token?: FenceTokenInput): T {
      const value = token === undefined ? ambientToken() : parseFenceToken(token)
      const context = Prisma.getExtensionContext(this) as T
      // A view holds nothing but the client and the token: a holder writing several times
      // with one token gets the same view back instead of a new one per call.
      let views = fencedViews.get(context)
      if (views === undefined) fencedViews.set(context, (views = new Map()))
      let view = views.get(value) as T | undefined
      if (view === undefined) {
        view = fenceClient(context, { token: value, options: resolved, dataModel, delegates })
        if (views.size >= MAX_VIEWS_PER_CLIENT) views.delete(views.keys().next().value as bigint)
        views.set(value, view)
      }
      return view
    }
    // Typed with the models, so fencedTransaction can refuse an unfenced model at compile time.
    return client.$extends({
      name: '@fencelock/fencing',
      client: { $fenced: $fenced as FencedMethod<M> },
      // What a fenced write actually sends, after every query extension (yours may add a nested
      // write the check of $fenced never saw): checked again here, before it goes to the database.
      // On the write operations only: a read never reaches the hook, so it costs reads nothing.
      query: { $allModels: SENT_CHECKS },
    })
  })
}

/** The query hook of a write operation: the check of what a fenced write sends (fenced-write.ts), then the query. */
function sentCheck<A>({ model, operation, args, query }: { model: string; operation: string; args: A; query: (args: A) => Promise<unknown> }): Promise<unknown> {
  checkSent(model, operation, args)
  return query(args)
}

/** The hook on every write operation, and on nothing else. */
const SENT_CHECKS = Object.fromEntries([...WRITE_OPERATIONS].map((operation) => [operation, sentCheck]))

// The fenced views of each client (or transaction client), by token; held weakly by the client.
const fencedViews = new WeakMap<object, Map<bigint, object>>()
// Tokens grow, so an old one is rarely asked again: the oldest view goes first.
const MAX_VIEWS_PER_CLIENT = 32

function ambientToken(): bigint {
  const token = currentFenceToken()
  if (token === undefined) throw new MissingFenceTokenError()
  return token
}

/** Every fenced model must exist in this client, with a `BigInt` fence column. */
export function checkModels(client: object, options: ResolvedFencingOptions, dataModel: DataModel | undefined): void {
  for (const [model, field] of options.models) {
    if (dataModel === undefined) {
      // Without the data model we can only see whether the delegate exists.
      const delegate = (client as Record<string, unknown>)[delegateKey(model)]
      if (delegate === null || typeof delegate !== 'object') throw new InvalidFencingOptionError('models', 'must name models of this Prisma client', model)
      continue
    }
    const shape = dataModel.get(model)
    if (shape === undefined) {
      throw new InvalidFencingOptionError('models', `must name models of this Prisma client (${[...dataModel.keys()].join(', ')})`, model)
    }
    const type = shape.scalars.get(field)
    if (type !== 'BigInt') {
      throw new InvalidFencingOptionError(`models.${model}`, `must name a BigInt field of ${model}${type === undefined ? '' : ` (it is ${type})`}`, field)
    }
  }
}
