/**
 * When the Locker takes etcd for unreachable (src/etcd/etcd-reachability.ts): only once every
 * member the client knows has refused a connection since the last answer. The messages are the
 * ones grpc-js gave in this package's runs (a member killed -9, a port nothing listens on, a host
 * that does not resolve); the member counts are read off real etcd3 clients (no I/O). The cluster
 * behaviour itself is test/etcd/cluster.test.ts and test/etcd/etcd-down.test.ts.
 */
import { Etcd3 } from 'etcd3'
import { describe, expect, it } from 'vitest'
import { EtcdDownError, EtcdReachability, endpointCount, failedAddress } from '../../src/etcd/etcd-reachability.js'

const refused = (port: number) =>
  new Error(
    `14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:${port}. Resolution note: `,
  )
const unresolved = new Error(
  '14 UNAVAILABLE: Name resolution failed for target dns:fencelock-no-such-host.invalid:2379',
)
const noAddress = new Error('14 UNAVAILABLE: No connection established. Last error: null. Resolution note: ')
const etcdAnswered = new Error('14 UNAVAILABLE: etcdserver: request timed out, possibly due to previous leader failure')

describe('what a connection failure names', () => {
  it('the refused address, the unresolved target, or nothing', () => {
    expect(failedAddress(refused(2379))).toBe('127.0.0.1:2379')
    expect(failedAddress(unresolved)).toBe('dns:fencelock-no-such-host.invalid:2379')
    expect(failedAddress(noAddress)).toBeUndefined()
    expect(failedAddress(etcdAnswered)).toBeUndefined()
  })

  it("an etcd3 client's members: its hosts (one when given as a string or not at all), its namespaces' too; unknown for another shape", () => {
    const three = new Etcd3({ hosts: ['127.0.0.1:1', '127.0.0.1:2', '127.0.0.1:3'] })
    const one = new Etcd3({ hosts: '127.0.0.1:1' })
    const byDefault = new Etcd3()
    try {
      expect(endpointCount(three)).toBe(3)
      expect(endpointCount(three.namespace('app/'))).toBe(3)
      expect(endpointCount(one)).toBe(1)
      expect(endpointCount(byDefault)).toBe(1)
      expect(endpointCount({ kv: {} })).toBeUndefined()
      expect(endpointCount({ options: { hosts: [] } })).toBeUndefined()
    } finally {
      for (const c of [three, one, byDefault]) c.close()
    }
  })
})

describe('unreachable: every member refused since the last answer', () => {
  it('three members, the same one refusing again and again with nothing answered (a leader killed, the survivors electing): never unreachable', () => {
    const r = new EtcdReachability(3)
    for (let i = 0; i < 50; i++) expect(r.failed(refused(1))).not.toBeInstanceOf(EtcdDownError)
    expect(r.failed(noAddress)).not.toBeInstanceOf(EtcdDownError)
    expect(r.down()).toBeUndefined()
  })

  it('three members, each refusing: unreachable at the third, and down() says so; its cause the last refusal', () => {
    const r = new EtcdReachability(3)
    expect(r.failed(refused(1))).not.toBeInstanceOf(EtcdDownError)
    expect(r.failed(refused(2))).not.toBeInstanceOf(EtcdDownError)
    const third = r.failed(refused(3))
    expect(third).toBeInstanceOf(EtcdDownError)
    expect((third as Error).cause).toEqual(refused(3))
    expect(r.down()).toBeInstanceOf(EtcdDownError)
  })

  it('an answer between clears the refusals: two refused, an answer, the third refused: not unreachable', () => {
    const r = new EtcdReachability(3)
    r.failed(refused(1))
    r.failed(refused(2))
    r.answered()
    expect(r.failed(refused(3))).not.toBeInstanceOf(EtcdDownError)
    // An error etcd itself sent is an answer too.
    r.failed(refused(1))
    r.failed(refused(2))
    expect(r.failed(etcdAnswered)).toBe(etcdAnswered)
    expect(r.failed(refused(3))).not.toBeInstanceOf(EtcdDownError)
  })

  it('one member: its first refusal, or a host that does not resolve', () => {
    expect(new EtcdReachability(1).failed(refused(1))).toBeInstanceOf(EtcdDownError)
    expect(new EtcdReachability(1).failed(unresolved)).toBeInstanceOf(EtcdDownError)
  })

  it('members unknown: never unreachable (acquires end by their waitMs)', () => {
    const r = new EtcdReachability(undefined)
    for (let i = 0; i < 10; i++) expect(r.failed(refused(i))).not.toBeInstanceOf(EtcdDownError)
    expect(r.down()).toBeUndefined()
  })
})
