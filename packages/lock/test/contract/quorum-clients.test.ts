/**
 * The Locker and family contracts in quorum mode through the other client libraries (node-redis,
 * iovalkey, GLIDE): the same suites as quorum.test.ts, parameterized by the Locker's clients.
 */
import { beforeAll } from 'vitest'
import { OTHER_CLIENT_LIBRARIES, prepareClients } from '../support/clients.js'
import { useQuorumNodes } from '../support/quorum.js'
import { fencedStore } from '../support/fenced-store.js'
import { quorumDeployment } from './deployments.js'
import { familyContract } from './family-contract.js'
import { lockerContract } from './locker-contract.js'

const nodes = useQuorumNodes(3)
beforeAll(async () => {
  for (const library of OTHER_CLIENT_LIBRARIES)
    await prepareClients(
      library,
      nodes.proxies.map((proxy) => proxy.port),
    )
})

for (const library of OTHER_CLIENT_LIBRARIES) {
  const deployment = quorumDeployment(library, nodes)
  lockerContract(`a quorum of 3 independent masters, through ${library}`, deployment)
  familyContract(`a quorum of 3 independent masters, through ${library}`, deployment, () =>
    fencedStore(nodes.admins[0]!),
  )
}
