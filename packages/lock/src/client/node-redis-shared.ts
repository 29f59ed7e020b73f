/**
 * What node-redis's adapters share: a single client's (node-redis-client.ts), a Sentinel
 * client's (node-redis-sentinel.ts) and a Cluster client's (node-redis-cluster.ts).
 */

/** Command arguments as the strings node-redis sends. */
export function strings(args: readonly (string | number)[]): string[] {
  const out = new Array<string>(args.length)
  for (let i = 0; i < args.length; i++) out[i] = String(args[i])
  return out
}

/** A lost socket, which node-redis reports as an error and then reconnects: not a failed connection. */
export function isLostSocket(error: Error): boolean {
  return error.name === 'SocketClosedUnexpectedlyError' || error.constructor.name === 'SocketClosedUnexpectedlyError'
}

/**
 * One adapter per client, however many Lockers share it (the adapter listens to the client for as
 * long as the client lives): the adapter `create` makes for `client` the first time, the same after.
 */
export function oncePerClient<C extends object, A>(create: (client: C) => A): (client: C) => A {
  const adapters = new WeakMap<C, A>()
  return (client) => {
    let adapter = adapters.get(client)
    if (adapter === undefined) {
      adapter = create(client)
      adapters.set(client, adapter)
    }
    return adapter
  }
}

/**
 * The options of every command the Locker sends through node-redis: without node-redis's own
 * command timeout. node-redis 6 gives each command `commandOptions.timeout` (5 s by default) as
 * an `AbortSignal.timeout()` with an abort listener, counted while the command waits to be
 * written: measured here (one client, 50 workers, an acquire + release each, two commands),
 * 38.8k → 81.3k operations per second and 24.2 → 6.7 µs of client CPU per operation without it.
 * The Locker bounds every call it waits on itself (`commandTimeoutMs`, the wait's deadline), and
 * a command written late, after a reconnection, is handled as on ioredis, which has no command
 * timeout. The user's own commands keep the client's options.
 */
export const LOCKER_COMMAND_OPTIONS: { readonly timeout: number } = Object.freeze({ timeout: 0 })
