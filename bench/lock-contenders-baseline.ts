// An earlier build of @fencelock/lock as contenders of `npm run bench:lock`, for before/after
// ratios in one run (same servers, same machine, same moment). Build the earlier commit first:
//
//   git archive <commit> packages/lock | tar -x -C scratch && mv scratch/packages/lock scratch/lock-before
//   (cd scratch/lock-before && sed -i 's#@fencelock/tsconfig/base.json#../../packages/tsconfig/base.json#' tsconfig.build.json && npx tsc -p tsconfig.build.json)
//   LOCK_BASELINE=scratch/lock-before/dist/index.js npm run bench:lock -- --contenders-module bench/lock-contenders-baseline.ts
//
// The rows are labelled "before (...)"; they are not judged against the targets.
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Redis } from 'ioredis'
import type { LockContender, QuorumScenario, Scenario } from './lock-contenders.js'

interface BaselineLock {
  release(): Promise<unknown>
}
interface BaselineLocker {
  acquire(resource: string): Promise<BaselineLock>
  close(): Promise<void>
}
type BaselineModule = { Locker: new (redis: Redis | Redis[], options: object) => BaselineLocker }

const path = process.env.LOCK_BASELINE
if (!path) throw new Error('LOCK_BASELINE must name the earlier build (its dist/index.js): see the top of bench/lock-contenders-baseline.ts')
const { Locker } = (await import(pathToFileURL(resolve(path)).href)) as BaselineModule

function before(id: string, label: string, scenarios: readonly Scenario[], quorum: boolean): LockContender {
  return {
    id,
    label,
    targets: false,
    scenarios,
    layout: 'shared',
    async create({ redis, nodes, ttlMs, waitMs }) {
      const locker = new Locker(quorum ? [...nodes] : redis, waitMs === undefined ? { ttlMs } : { ttlMs, waitMs })
      return {
        async acquire(key) {
          const lock = await locker.acquire(key)
          return () => lock.release()
        },
        close: () => locker.close(),
      }
    },
  }
}

const QUORUM: readonly QuorumScenario[] = ['quorum-uncontended', 'quorum-contended']

export const contenders: LockContender[] = [
  before('before', 'before (1 Locker)', ['uncontended', 'contended'], false),
  before('before-quorum', 'before (1 Locker over N)', QUORUM, true),
]
