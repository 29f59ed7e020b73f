// node-redis's per-command timeout (`commandOptions.timeout`, 5 s by default) is not applied to
// the Locker's commands (src/client/node-redis-shared.ts, LOCKER_COMMAND_OPTIONS): node-redis 6
// makes it an `AbortSignal.timeout()` with a listener for every command, counted while the
// command waits to be written — the largest part of a node-redis command's client CPU here
// (docs/LOCK.md has the figures) — and the Locker bounds every call with deadlines of its own.
// Observed on a real client: every command the Locker sends carries `timeout: 0`, whatever the
// client's own option.
import { createClient } from 'redis'
import { beforeAll, describe, expect, it } from 'vitest'
import { Locker } from '../../src/index.js'
import { unique } from '../support/connections.js'
import { startRedisServer, type RedisServer } from '../support/redis-server.js'

let server: RedisServer
beforeAll(async () => {
  server = await startRedisServer()
})

describe("node-redis's command timeout and the Locker", () => {
  it.each([undefined, 50, 5_000])(
    "the client's commandOptions.timeout %s: each of the Locker's commands is sent with timeout 0 (acquire, extend, release, inspect)",
    async (timeout) => {
      const client = createClient({
        socket: { host: '127.0.0.1', port: server.port },
        ...(timeout === undefined ? {} : { commandOptions: { timeout } }),
      })
      client.on('error', () => {})
      await client.connect()
      // Records the options of every command sent through the client, then sends it as it was.
      const sent: { command: string; timeout: unknown }[] = []
      const send = client.sendCommand.bind(client)
      client.sendCommand = ((args: readonly string[], options?: { timeout?: number }) => {
        sent.push({ command: String(args[0]), timeout: options?.timeout })
        return send(args as string[], options)
      }) as typeof client.sendCommand
      const locker = new Locker(client, { ttlMs: 10_000 })
      try {
        const resource = unique('nr-timeout')
        const lock = await locker.acquire(resource)
        await lock.extend(20_000)
        await locker.inspect(resource)
        expect(await lock.release()).toBe(true)
        expect(sent.length).toBeGreaterThanOrEqual(4)
        expect(sent.filter((s) => s.timeout !== 0)).toEqual([])
      } finally {
        await locker.close()
        client.destroy()
      }
    },
  )
})
