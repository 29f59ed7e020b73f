// What the quorum scenarios ran and brought, as saved in the report's JSON: shared by the report of
// the whole run (lock-report.ts) and its quorum part (lock-quorum-report.ts), which otherwise import
// each other.
import type { ContendedResult, UncontendedResult } from './lock-child.js'
import type { DegradedResult, MajorityDownResult } from './lock-quorum-faults.js'

/** What the quorum scenarios ran (lock.bench.ts's QUORUM_PLAN). */
export interface QuorumPlan {
  uncontended: { nodes: number[]; workers: number[]; warmupMs: number; durationMs: number; rounds: number }
  contended: { nodes: number; workers: number; holdMs: number; warmupMs: number; durationMs: number; rounds: number }
  degraded: { nodes: number; kill: number; workers: number; warmupMs: number; allUpMs: number; windowMs: number; rssCapMb: number }
  majorityDown: { nodes: number; kill: number; waitMs: number; warmupMs: number; tries: number; tryDeadlineMs: number; windowMs: number }
}

/** The quorum scenarios' plan and results, as saved in the report's JSON. */
export interface QuorumReport {
  plan: QuorumPlan
  uncontended: UncontendedResult[]
  contended: ContendedResult[]
  degraded: DegradedResult[]
  majorityDown: MajorityDownResult[]
}

