/** The Locker contract (locker-contract.ts) and the family's on etcd: a member of this file's own. */
import type { Etcd3 } from 'etcd3'
import { beforeAll } from 'vitest'
import {
  etcdClient,
  etcdFencedStore,
  etcdLocker,
  lockRange,
  startEtcdServer,
  type EtcdMember,
} from '../etcd/etcd-support.js'
import { familyContract } from './family-contract.js'
import { lockerContract, type ContractDeployment } from './locker-contract.js'

let member: EtcdMember
let admin: Etcd3
beforeAll(async () => {
  member = await startEtcdServer()
  admin = etcdClient(member.endpoint)
})

const deployment: ContractDeployment = {
  locker: (options) => etcdLocker(member.endpoint, options),
  steal: async (resource) => {
    await admin.delete().prefix(lockRange(resource))
  },
  // The oldest key holds the lock; every other one is a Locker waiting.
  traces: async (resource) => {
    const n = await admin.getAll().prefix(lockRange(resource)).count()
    return { held: Math.min(1, n), queued: Math.max(0, n - 1) }
  },
}

lockerContract('etcd', deployment)
familyContract('etcd', deployment, () => etcdFencedStore(admin))
