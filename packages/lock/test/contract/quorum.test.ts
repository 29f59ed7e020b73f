/** The Locker contract (locker-contract.ts) in quorum mode: three redis-servers of this file's own. */
import { useQuorumNodes } from '../support/quorum.js'
import { fencedStore } from '../support/fenced-store.js'
import { quorumDeployment } from './deployments.js'
import { familyContract } from './family-contract.js'
import { lockerContract } from './locker-contract.js'

const nodes = useQuorumNodes(3)
const deployment = quorumDeployment('ioredis', nodes)

lockerContract('a quorum of 3 independent masters', deployment)
familyContract('a quorum of 3 independent masters', deployment, () => fencedStore(nodes.admins[0]!))
