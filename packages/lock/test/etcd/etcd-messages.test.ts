/**
 * An acquire that ends because the store did not answer names the store it asked: etcd on etcd,
 * Redis on Redis (the control) — a user reading "Redis did not answer" from a Locker on etcd would
 * look for a Redis that is not there.
 */
import { freePort } from '@fencelock/devkit/net'
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { Locker, LockUnavailableError } from '../../src/index.js'
import { unique } from '../support/connections.js'
import { settle } from '../support/timing.js'
import { etcdLocker } from './etcd-support.js'

describe('the store a LockUnavailableError names', () => {
  it('etcd that does not answer: the message says etcd, and never Redis', async () => {
    const locker = etcdLocker(`127.0.0.1:${await freePort()}`, { commandTimeoutMs: 300 })
    const { error } = await settle(() => locker.acquire(unique('e-msg'), { waitMs: 500 }))
    expect(error).toBeInstanceOf(LockUnavailableError)
    expect((error as Error).message).toMatch(/etcd/)
    expect((error as Error).message).not.toMatch(/Redis/)
  })

  it('control: Redis that does not answer: the message says Redis', async () => {
    // Nothing listens there; no reconnection, so the failure is the call's, not a wait for one.
    const redis = new Redis({
      port: await freePort(),
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    redis.on('error', () => {})
    const locker = new Locker(redis, { commandTimeoutMs: 300 })
    try {
      const { error } = await settle(() => locker.acquire(unique('r-msg'), { waitMs: 500 }))
      expect(error).toBeInstanceOf(LockUnavailableError)
      expect((error as Error).message).toMatch(/Redis/)
    } finally {
      await locker.close()
      redis.disconnect()
    }
  })
})
