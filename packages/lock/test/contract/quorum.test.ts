/** The Locker contract (locker-contract.ts) in quorum mode: three redis-servers of this file's own. */
import { resourceKeys } from '../../src/index.js'
import { useQuorumNodes } from '../support/quorum.js'
import { fencedStore } from '../support/fenced-store.js'
import { familyContract } from './family-contract.js'
import { lockerContract, type ContractDeployment } from './locker-contract.js'

const nodes = useQuorumNodes(3)
const keysOf = (resource: string) => resourceKeys('fencelock:', resource)
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0)

const deployment: ContractDeployment = {
  locker: (options) => nodes.locker(options),
  steal: async (resource) => {
    await Promise.all(nodes.admins.map((a) => a.del(keysOf(resource).lock)))
  },
  traces: async (resource) => ({
    held: sum(await Promise.all(nodes.admins.map((a) => a.exists(keysOf(resource).lock)))),
    queued: sum(await Promise.all(nodes.admins.map((a) => a.zcard(keysOf(resource).queue)))),
  }),
}

lockerContract('a quorum of 3 independent masters', deployment)
familyContract('a quorum of 3 independent masters', deployment, () => fencedStore(nodes.admins[0]!))
