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
