/**
 * One process of the mutual-exclusion hammer (hammer.ts): a Locker over one Redis or a quorum,
 * looping acquire → hold → release on one resource with 5-20 ms leases (10-20 ms in quorum
 * mode), holding for up to the lease, every fourth time for twice the lease (so leases run out while
 * "held"). Each grant is
 * written as a line of JSON (hammer-check.ts's GrantRecord) to HAMMER_OUT at the end.
 *
 * Environment: HAMMER_URLS (comma-separated: 1 URL, or 3+ for quorum mode), HAMMER_RESOURCE,
 * HAMMER_DURATION_MS, HAMMER_PROCESS (its number), HAMMER_OUT.
 */
import { writeFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import { Locker, LockError } from '@fencelock/lock'
import type { GrantRecord } from './hammer-check.js'

const env = (name: string): string => {
  const value = process.env[name]
  if (!value) throw new Error(`${name} is not set`)
  return value
}
const urls = env('HAMMER_URLS').split(',')
const resource = env('HAMMER_RESOURCE')
const durationMs = Number(env('HAMMER_DURATION_MS'))
const processNo = Number(env('HAMMER_PROCESS'))
const out = env('HAMMER_OUT')

const nowNs = (): number => Number(process.hrtime.bigint())
const clients = urls.map((url) => {
  const client = new Redis(url, { maxRetriesPerRequest: 1 })
  client.on('error', () => {})
  return client
})
const quorum = clients.length > 1
// A short hand-off: a process the machine has descheduled must not hold a handed-over lock for long.
const locker = new Locker(quorum ? clients : clients[0]!, { commandTimeoutMs: 500, pollMs: 100, handoffMs: 50 })
const minTtl = quorum ? 10 : 5
const records: GrantRecord[] = []
const errors: Record<string, number> = {}
const until = performance.now() + durationMs
let round = 0
while (performance.now() < until) {
  round++
  const ttlMs = minTtl + Math.floor(Math.random() * (21 - minTtl))
  let lock
  try {
    lock = await locker.acquire(resource, { ttlMs, waitMs: 1_000 })
  } catch (error) {
    const name = error instanceof LockError ? error.name : 'Error'
    errors[name] = (errors[name] ?? 0) + 1
    continue
  }
  const grantedNs = nowNs()
  const validUntilNs = grantedNs + lock.remainingMs() * 1e6
  // Every fourth hold outlasts its lease twice over: the lease runs out while the holder "holds".
  await new Promise((resolve) => setTimeout(resolve, round % 4 === 0 ? 2 * ttlMs : Math.random() * ttlMs))
  const releasedNs = nowNs()
  await lock.release().catch(() => false)
  records.push({ process: processNo, token: lock.token.toString(), grantedNs, releasedNs, validUntilNs })
}
await locker.close()
await Promise.all(clients.map((c) => c.quit().catch(() => {})))
writeFileSync(out, JSON.stringify({ records, errors }))
