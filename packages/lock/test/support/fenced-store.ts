/**
 * A fenced register in Redis, standing for a store that checks tokens (the fencing package does
 * this in PostgreSQL): a write is taken when its token is not below the last one taken for the
 * name (equal tokens are the same holder), and refused otherwise. Tokens compared as decimal
 * strings, exact at any size.
 */
import type { FencedStore } from '../contract/family-contract.js'

const FENCED_WRITE = `
local last = redis.call('GET', KEYS[1])
local token = ARGV[1]
if last and (#last > #token or (#last == #token and last > token)) then return 0 end
redis.call('SET', KEYS[1], token, 'PX', 600000)
return 1
`

/** A client that runs a script: an ioredis `Redis` or `Cluster`. */
export interface EvalClient {
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>
}

export function fencedStore(redis: EvalClient): FencedStore {
  return {
    write: async (name, token) => (await redis.eval(FENCED_WRITE, 1, `fenced-store:{${name}}`, String(token))) === 1,
  }
}
