import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'

/**
 * The part of an ioredis `Redis` or `Cluster` that running a script needs. Structural, so the
 * lock works with either and tests can hand in any client with these two methods.
 */
export type ScriptClient = Pick<Redis, 'evalsha' | 'eval'>

/** A Lua script run by SHA, with a transparent fallback to EVAL on NOSCRIPT. */
export interface Script {
  readonly sha: string
  run(client: ScriptClient, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown>
}

/**
 * Wraps a Lua script: the SHA is computed up front, each call is one `EVALSHA`, and a `NOSCRIPT`
 * reply (after `SCRIPT FLUSH`, a restart or a failover) is answered by one `EVAL`, which also
 * loads the script for the next call.
 */
export function defineScript(lua: string): Script {
  const sha = createHash('sha1').update(lua).digest('hex')
  return {
    sha,
    async run(client, keys, args) {
      try {
        return await client.evalsha(sha, keys.length, ...keys, ...args)
      } catch (error) {
        if (!isNoScript(error)) throw error
        return await client.eval(lua, keys.length, ...keys, ...args)
      }
    },
  }
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}
