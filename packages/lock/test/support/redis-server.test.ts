import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { connect, ready } from './connections.js'
import { startRedisServer } from './redis-server.js'

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe('the spawned redis-server support', () => {
  it('starts on a free port with debug allowed, pauses, resumes, restarts on the same port empty, and leaves no process', async () => {
    const server = await startRedisServer()
    const client = connect({ port: server.port }, { maxRetriesPerRequest: null })
    await ready(client, server.url)
    expect(await client.debug('SLEEP', 0)).toBe('OK') // --enable-debug-command local
    expect(await client.config('GET', 'save')).toEqual(['save', ''])
    await client.set('k', 'v')

    server.pause()
    const paused = await Promise.race([client.ping().then(() => 'answered'), new Promise((r) => setTimeout(() => r('silent'), 150))])
    expect(paused).toBe('silent')
    server.resume()
    await ready(client, server.url)

    const { port, pid } = server
    await server.restart()
    expect(server.port).toBe(port)
    expect(server.pid).not.toBe(pid)
    expect(alive(pid)).toBe(false)
    await ready(client, server.url)
    expect(await client.get('k')).toBeNull() // nothing persisted

    const last = server.pid
    server.pause() // a stopped process must die too
    await server.dispose()
    expect(alive(last)).toBe(false)
  })

  it('fails loudly, never skips, when a Redis does not answer', async () => {
    const nobody = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: () => 50 })
    nobody.on('error', () => {})
    try {
      await expect(ready(nobody, 'redis://127.0.0.1:1', 300)).rejects.toThrow(/did not answer PING within 300 ms.*never skip/)
    } finally {
      nobody.disconnect()
    }
  })
})
