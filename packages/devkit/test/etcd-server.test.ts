/**
 * The spawned etcd members (src/etcd-server.ts): a single member and a 3-member cluster on free
 * loopback ports, kill -9 and restart on the same data directory (what it committed is kept),
 * SIGSTOP/SIGCONT, and nothing left behind (process and directory) after dispose. Talks to etcd
 * over its JSON gateway (`/v3/kv/put`, `/v3/kv/range`), so no etcd client is needed here.
 */
import { existsSync } from 'node:fs'
import { request } from 'node:http'
import { afterAll, describe, expect, it } from 'vitest'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { answersAs, EtcdMember, startEtcdCluster, startEtcdServer, stopAllEtcdServers } from '../src/etcd-server.js'
import { freePort } from '../src/net.js'

afterAll(stopAllEtcdServers)

const b64 = (text: string) => Buffer.from(text).toString('base64')

/** POSTs `body` to etcd's JSON gateway on `port`; the parsed answer, or undefined after `ms`. */
function gateway(port: number, path: string, body: object, ms = 3_000): Promise<Record<string, unknown> | undefined> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', timeout: ms }, (res) => {
      let text = ''
      res.on('data', (chunk: Buffer) => (text += chunk.toString()))
      res.on('end', () => {
        try {
          resolve(JSON.parse(text) as Record<string, unknown>)
        } catch {
          resolve({ text })
        }
      })
    })
    req.on('timeout', () => {
      req.destroy()
      resolve(undefined)
    })
    req.on('error', () => resolve(undefined))
    req.end(JSON.stringify(body))
  })
}

/**
 * Asks until the answer has `has` (an error answer, `leader changed` or `request timed out` while a
 * member starts or an election runs, has not), within 30 s; the last answer.
 */
async function answered(port: number, path: string, body: object, has: string) {
  const deadline = performance.now() + 30_000
  for (;;) {
    const answer = await gateway(port, path, body, 5_000)
    if (answer?.[has] !== undefined || performance.now() > deadline) return answer
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe('the spawned etcd', () => {
  it('a member keeps what it committed across kill -9 and restart; paused it answers nothing; disposed, nothing is left', async () => {
    const member = await startEtcdServer()
    const port = member.clientPort
    expect((await answered(port, '/v3/kv/put', { key: b64('k'), value: b64('v') }, 'header'))?.header).toBeDefined()
    await member.restart()
    await member.waitHealthy()
    const range = await answered(port, '/v3/kv/range', { key: b64('k') }, 'kvs')
    expect(range?.kvs).toMatchObject([{ value: b64('v') }])
    member.pause()
    expect(await gateway(port, '/v3/kv/range', { key: b64('k') }, 500)).toBeUndefined()
    member.resume()
    expect((await answered(port, '/v3/kv/range', { key: b64('k') }, 'kvs'))?.kvs).toBeDefined()
    const pid = member.pid
    await member.dispose()
    expect(alive(pid)).toBe(false)
    expect(existsSync(member.dir)).toBe(false)
  })

  it('a 3-member cluster: one of them killed, the other two still commit', async () => {
    const cluster = await startEtcdCluster(3)
    expect(cluster.endpoints).toHaveLength(3)
    await cluster.members[0]!.kill()
    // If the killed member led, the other two elect a leader first (`answered` asks again).
    const put = await answered(cluster.members[1]!.clientPort, '/v3/kv/put', { key: b64('k'), value: b64('v') }, 'header')
    expect(put?.header).toBeDefined()
    const range = await answered(cluster.members[2]!.clientPort, '/v3/kv/range', { key: b64('k') }, 'kvs')
    expect(range?.kvs).toMatchObject([{ value: b64('v') }])
    await cluster.dispose()
  })

  it('a member whose client port another etcd took is not taken for healthy: the one answering is asked its name', async () => {
    const other = await startEtcdServer()
    expect(await answersAs(other.clientPort, other.name)).toBe(true)
    // A member of another cluster listening on the port answers /health all the same.
    expect(await answersAs(other.clientPort, 'm0-someone-else')).toBe(false)
    const late = new EtcdMember('late', other.clientPort, await freePort(), mkdtempSync(join(tmpdir(), 'fencelock-etcd-')))
    late.join(`late=${late.peerUrl}`, 'fencelock-late')
    late.spawn()
    try {
      await expect(late.waitHealthy(3_000)).rejects.toThrow(/not healthy/)
    } finally {
      await late.dispose()
      await other.dispose()
    }
  })
})
