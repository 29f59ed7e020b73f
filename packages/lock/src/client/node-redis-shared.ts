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
