/**
 * etcd for the lock tests: members spawned by the devkit's test kit (stopped by PID in `afterAll`
 * of every test file that imports this module), etcd3 clients and Lockers closed there too, and a
 * fenced register kept in etcd for the family contract.
 */
import { stopAllEtcdServers } from '@fencelock/devkit/etcd-server'
import { Etcd3 } from 'etcd3'
import { afterAll } from 'vitest'
import { Locker, type LockerOptions } from '../../src/index.js'
import type { FencedStore } from '../contract/family-contract.js'

export { startEtcdServer, startEtcdCluster, type EtcdMember, type EtcdCluster } from '@fencelock/devkit/etcd-server'

const clients = new Set<Etcd3>()
const lockers = new Set<Locker>()

afterAll(async () => {
  await Promise.allSettled([...lockers].map((l) => l.close()))
  for (const c of clients) c.close()
  await stopAllEtcdServers()
})

/** An etcd3 client of `endpoints`, closed in afterAll. */
export function etcdClient(endpoints: string | readonly string[]): Etcd3 {
  const client = new Etcd3({ hosts: typeof endpoints === 'string' ? endpoints : [...endpoints] })
  clients.add(client)
  return client
}

/** A Locker on a client of its own, closed in afterAll. */
export function etcdLocker(endpoints: string | readonly string[], options: LockerOptions = {}): Locker {
  const locker = new Locker(etcdClient(endpoints), options)
  lockers.add(locker)
  return locker
}

/** Where the keys of `resource`'s lockers are (the default prefix). */
export const lockRange = (resource: string, prefix = 'fencelock:') => `${prefix}lock/${resource}/`

/**
 * A fenced register in etcd: a write is taken when its token is not below the last one taken for
 * the name. Tokens are kept as 20-digit decimals, so etcd's byte order is their numeric order.
 */
export function etcdFencedStore(admin: Etcd3): FencedStore {
  return {
    write: async (name, token) => {
      const key = `fenced-store/${name}`
      const padded = String(token).padStart(20, '0')
      // Refused when the stored token is greater; a missing key compares false, so it is written.
      const r = await admin.if(key, 'Value', '>', padded).commit()
      if (r.succeeded) return false
      const w = await admin.if(key, 'Value', '>', padded).else(admin.put(key).value(padded)).commit()
      return !w.succeeded
    },
  }
}
