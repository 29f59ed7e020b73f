/**
 * `npm run chaos`: every scenario, fenced then lock-only, checked, and the table written to
 * docs/RELIABILITY.md. Exit codes (EXIT_CODES): 0 all pass; 1 a scenario fails its acceptance (see
 * `verdict`); 2 a bad command line or a run that could not start; 130 Ctrl-C; 143 SIGTERM.
 *
 *   npm run chaos                      # the full set (15 s of faults per run), writes docs/RELIABILITY.md
 *   npm run chaos -- --short           # the CI version (5 s per run, more where a scenario needs it), prints the tables only
 *   npm run chaos -- --only redis-stall,clock-jump --duration-ms 10000 --verbose
 *   npm run chaos -- --only quorum --no-write  # quorum mode over 3 redis-servers, both tables
 *   npm run chaos -- --only etcd --no-write    # the locks on a 3-member etcd cluster: leader kill -9, holder SIGSTOP past its lease
 *   npm run chaos -- --only election           # leader election: 3 candidates, the leader paused 10 times per mode
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { EXIT_CODES, integerFlag, runCommand, stringFlag, UsageError, type CliSpec } from '@fencelock/devkit/cli'
import { runElectionChaos, type ElectionChaosResult } from './election.js'
import { describeMachine, formatFailoverTable, formatQuorumTable, formatTable } from './reliability-report.js'
import { ETCD_MIN_LEASE_MS } from './etcd-faults.js'
import { ETCD_MEMBERS, OUTAGE_SLACK_MS, QUORUM_NODES, SCENARIOS, TTL_MS, WAIT_MS } from './scenarios.js'
import { runSuite } from './suite.js'

/** The name `--only` knows the leader election scenario by. */
const ELECTION = 'election'
/** Pauses of the leader per mode in `npm run chaos` (the short test in apps/chaos runs 2). */
const ELECTION_PAUSES = 10
// (Constants used by the command sit up here: it runs at the top-level await below, before
// anything declared after it is initialised.)
const RELIABILITY_MD = fileURLToPath(new URL('../../../docs/RELIABILITY.md', import.meta.url))

export const CHAOS_CLI: CliSpec = {
  command: 'npm run chaos --',
  summary: 'Every fault scenario, fenced then lock-only, each run checked from its recorded history and the stores; the table on stdout, and in docs/RELIABILITY.md for a full run.',
  flags: {
    short: { type: 'boolean', description: 'the CI version: 5 s of faults per run (more where a scenario needs it: redis-stall 20 s, quorum 9 s), no slow scenarios (the failovers, worker-kill-9, etcd) and no election, tables printed only' },
    'duration-ms': { type: 'string', value: '<n>', description: 'faults per run, ms, 1000-600000', default: '15000, 5000 with --short' },
    only: { type: 'string', value: '<a,b>', description: `scenarios to run: ${[...SCENARIOS.map((s) => s.name), ELECTION].join(', ')}` },
    out: { type: 'string', value: '<file>', description: 'where to write the report', default: 'docs/RELIABILITY.md' },
    'no-write': { type: 'boolean', description: 'write no report' },
    verbose: { type: 'boolean', description: "show the workers' and the gateway's logs" },
  },
  notes: `REDIS_SERVER_BIN (default redis-server), DATABASE_URL (default: the machine's PostgreSQL, else embedded), CHAOS_LIBFAKETIME.`,
  failure: 'a scenario failed its acceptance',
}

await runCommand(CHAOS_CLI, process.argv.slice(2), async (values) => {
  const short = values.short === true
  const durationMs = integerFlag(values, 'duration-ms', short ? 5_000 : 15_000, 1_000, 600_000)
  const onlyText = stringFlag(values, 'only')
  const only = onlyText?.split(',').map((name) => name.trim())
  const known = new Set([...SCENARIOS.map((s) => s.name), ELECTION])
  const unknown = only?.filter((name) => !known.has(name)) ?? []
  if (unknown.length > 0) throw new UsageError(`--only: unknown scenario ${unknown.join(', ')}; known: ${[...known].join(', ')}`)
  if (values['no-write'] === true && values.out !== undefined) throw new UsageError('--out and --no-write exclude each other')
  const outText = stringFlag(values, 'out')
  const out = values['no-write'] === true || (short && outText === undefined) ? undefined : (outText ?? RELIABILITY_MD)
  const args = process.argv.slice(2)
  const command = `npm run chaos${args.length ? ` -- ${args.join(' ')}` : ''}`
  for (const [signal, code] of [['SIGINT', EXIT_CODES.interrupted], ['SIGTERM', EXIT_CODES.terminated]] as const) {
    process.on(signal, () => {
      // Workers, gateways and redis-servers are killed by their exit hooks.
      console.error(`\nchaos: ${signal === 'SIGINT' ? 'interrupted' : 'terminated'}`)
      process.exit(code)
    })
  }

  const began = performance.now()
  const suiteOnly = only?.filter((name) => name !== ELECTION)
  const outcomes = suiteOnly?.length === 0 ? [] : await runSuite({
    durationMs,
    ...(suiteOnly ? { only: suiteOnly } : {}),
    // The CI version leaves the failovers out, as npm test's suite does (--only still runs them).
    skipSlow: short,
    verbose: values.verbose === true,
    onRun: (r) => {
      const m = r.check.majorityDown
      const majority =
        m.windows === 0
          ? ''
          : `; majority down ${m.windows}×: ${m.asked} acquires asked, ${Object.entries(m.failed).map(([e, n]) => `${n} ${e}`).join(', ') || 'none failed'}, ${m.grantedDuring.length} granted while down, ${m.unresolved.length} never ended, slowest ${m.slowest === null ? '—' : `${Math.round(m.slowest.ms)} ms (${Math.round(m.slowest.ms - m.slowest.stalledMs)} ms while its process ran)`}`
      const back = r.check.restartRecoveryMs.map((ms) => (ms === null ? 'never' : `${Math.round(ms)}`))
      const killed =
        back.length === 0
          ? ''
          : `; ${back.length} worker deaths (${Object.entries(r.faultKinds).filter(([k]) => k === 'worker-kill-9' || k === 'die-after-charge').map(([k, n]) => `${n} ${k}`).join(', ')}), ${r.check.diedInSection} inside a section, ${r.check.diedAsking} waiting for a lock; kill → the restarted worker's first grant: ${back.join(', ')} ms; reconciled before counting: ${r.reconciled === undefined ? '—' : `${r.reconciled.paid} paid from the ledger, ${r.reconciled.cancelled} cancelled, ${r.reconciled.failed} failed`}; money violations ${r.check.moneyViolations}`
      console.error(
        `  ${r.scenario} ${r.mode}: ${r.check.operations} ops, ${r.check.sections} grants, ${r.check.overlaps.length} overlaps (${r.check.unwarnedOverlaps} unwarned), ${r.check.safetyViolations} violations (${r.check.nonIncreasingTokens.length} tokens not increasing, ${r.check.doubleChargedOrders} order${r.check.doubleChargedOrders === 1 ? '' : 's'} charged twice (gateway ledger); ${r.check.gatewayCharges} charges, ${r.check.payments} payments recorded), ${r.check.faults} faults${majority}${killed} (${r.seconds.toFixed(1)} s)`,
      )
    },
  })
  // Leader election: its own processes and checker (election.ts), in the full run and by name; not in --short.
  const election = (only === undefined ? !short : only.includes(ELECTION)) ? await runElection() : undefined
  const seconds = (performance.now() - began) / 1000
  const table = outcomes.length === 0 ? '' : formatTable(outcomes)
  const quorumTable = formatQuorumTable(outcomes)
  const failoverTable = formatFailoverTable(outcomes)
  const electionTable = election === undefined ? '' : formatElectionTable(election)
  if (table !== '') console.log(table)
  if (quorumTable !== '') console.log(`\n${quorumTable}`)
  if (failoverTable !== '') console.log(`\n${failoverTable}`)
  if (electionTable !== '') console.log(`\n${electionTable}`)
  const failed = outcomes.filter((o) => o.problems.length > 0).length + (election && election.problems.length > 0 ? 1 : 0)
  const all = outcomes.length + (election ? 1 : 0)
  for (const problem of election?.problems ?? []) console.error(`election: ${problem}`)
  console.log(`\n${all - failed} of ${all} scenarios pass — ${seconds.toFixed(0)} s`)
  if (out !== undefined) {
    const etcdRan = outcomes.some((o) => o.scenario.etcdMembers !== undefined)
    writeFileSync(out, reliabilityDoc(table, quorumTable, failoverTable, electionTable, command, durationMs, seconds, etcdRan) + keptSections(out))
    console.error(`written: ${out}`)
  }
  return failed === 0 ? EXIT_CODES.ok : EXIT_CODES.failed
})

function reliabilityDoc(table: string, quorumTable: string, failoverTable: string, electionTable: string, command: string, durationMs: number, seconds: number, etcdRan: boolean): string {
  return `# Reliability: FenceLock under faults

Measured by \`${command}\` on ${new Date().toISOString().slice(0, 10)}, ${describeMachine()}; ${(seconds / 60).toFixed(1)} min in all.

Each scenario runs twice, **fenced** (lock + \`fencedTransaction\`) and **lock-only** (the same
lock, plain transactions), each run with 3 worker processes (3 concurrent clients each) running
the demo shop's purchase and payment code against a \`redis-server\` the suite spawned for that run
(${QUORUM_NODES}, independent masters, for \`quorum\`; the locks on a ${ETCD_MEMBERS}-member etcd cluster for \`etcd\`), a PostgreSQL schema of its own and a payment gateway
process of its own (its ledger in that schema; the faults never touch it), for ${durationMs / 1000} s of
faults (more where a scenario needs it: ${longer()}). TTL ${TTL_MS} ms, wait ${WAIT_MS} ms.
Every cell reads \`fenced / lock-only\`. How the suite works, and what each column means:
\`apps/chaos/README.md\`.

${table}

- **overlapping sections**: two holders of one lock inside their critical sections at once
  (CLOCK_MONOTONIC). The lock alone cannot prevent it under a pause; fencing makes it harmless.
  **unwarned**: of those, the ones where the first holder had not yet been told its lock was lost
  (the Locker's \`lost\` event, which aborts \`lock.signal\`) when the second entered: no holder
  code could have stopped in time (its own process was paused, or the lock was taken from under it).
- **stale writes accepted**: a committed write whose token is below one already committed on that
  row. **oversold / lost updates**: counted from the shop's database after the run.
- **orders charged twice (gateway ledger)**: orders with more than one charge in the payment
  gateway's own ledger (\`GatewayCharge\`), where the money moves — not payment rows in the shop:
  a holder frozen inside its charge wakes up with the card charged, and a fence on the shop's
  database refuses only its payment row. Fenced runs charge with an idempotency key derived from
  the order (\`order:<id>\`) and the lock's token in fencing headers, after recording the intent.
- **charges (gateway ledger) / payments recorded (shop)**: shown, not judged. With the lock alone
  a second charge of an order usually comes with a second payment row; fenced, a charge whose
  payment row was refused is recorded by the next holder, whose call with the same key replays
  the first charge.
- **tokens not increasing**: successive grants of one lock whose token did not grow.
- **stale writes rejected**: writes the database refused because a newer token had written the row.
- **recovery**: from the end of each fault to the next lock granted (any resource).
- A scenario **fails** when fenced shows any violation (an order charged twice at the gateway
  included), when a pause or stall scenario shows no overlap with the lock alone (it would not
  bite), when the clock jump changes anything, or, in quorum mode, when an acquire asked while a
  majority of the nodes was down was granted, hung, failed without the lock's typed error, or took
  longer than its wait plus ${OUTAGE_SLACK_MS} ms.
${quorumTable === '' ? '' : quorumSection(quorumTable)}${failoverTable === '' ? '' : failoverSection(failoverTable)}${etcdRan ? etcdSection() : ''}${electionTable === '' ? '' : electionSection(electionTable)}`
}


interface ElectionOutcome {
  readonly fenced: ElectionChaosResult
  readonly unfenced: ElectionChaosResult
  readonly problems: string[]
}

/** Runs the election scenario fenced, then unfenced (the control), and judges the pair. */
async function runElection(): Promise<ElectionOutcome> {
  const fenced = await runElectionChaos({ fenced: true, pauses: ELECTION_PAUSES })
  const unfenced = await runElectionChaos({ fenced: false, pauses: ELECTION_PAUSES })
  for (const r of [fenced, unfenced])
    console.error(
      `  election ${r.fenced ? 'fenced' : 'unfenced'}: ${r.pauses} pauses (${r.blocked} with the successor unable to write), ${r.elections} elections, ${r.leases.overlaps} overlaps of valid leases, ${r.believed.overlaps} as believed, ${r.writes.accepted} writes accepted, ${r.writes.outOfOrder} out of term order, ${r.refused} refused (${r.seconds.toFixed(1)} s)`,
    )
  const problems: string[] = []
  for (const r of [fenced, unfenced]) {
    const mode = r.fenced ? 'fenced' : 'unfenced'
    if (r.pauses < ELECTION_PAUSES) problems.push(`${mode}: ${r.pauses} of ${ELECTION_PAUSES} pauses made`)
    if (r.leases.overlaps > 0) problems.push(`${mode}: ${r.leases.overlaps} overlaps of valid leases (two leaders at once)`)
    if (r.leases.tokenInversions > 0) problems.push(`${mode}: ${r.leases.tokenInversions} terms not increasing`)
  }
  if (fenced.writes.outOfOrder > 0) problems.push(`fenced: ${fenced.writes.outOfOrder} writes accepted out of term order`)
  if (fenced.refused === 0) problems.push('fenced: no deposed leader\'s write was refused: the pauses did not bite')
  if (unfenced.writes.outOfOrder === 0) problems.push('unfenced: no write out of term order: the control did not bite')
  return { fenced, unfenced, problems }
}

function formatElectionTable(e: ElectionOutcome): string {
  const row = (r: ElectionChaosResult) =>
    `| ${r.fenced ? 'fenced' : 'unfenced (the control)'} | ${r.pauses}${r.blocked > 0 ? ` (${r.blocked} with the successor unable to write)` : ''} | ${r.elections} | ${r.leases.overlaps} | ${r.believed.overlaps} | ${r.writes.accepted} | **${r.writes.outOfOrder}** | ${r.refused} |`
  return [
    '| leader writes | pauses of the leader | elections | overlaps of valid leases | overlaps as believed | writes accepted | accepted out of term order | refused by the fence |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    row(e.fenced),
    row(e.unfenced),
    '',
    e.problems.length === 0 ? 'Verdict: pass.' : `Verdict: **fail** — ${e.problems.join('; ')}.`,
  ].join('\n')
}

function etcdSection(): string {
  return `
## The same Locker on etcd: the leader killed, a holder frozen past its lease

The \`etcd\` row of the table at the top: the workers' \`Locker\` on a ${ETCD_MEMBERS}-member etcd cluster the
devkit spawned on loopback ports (\`new Locker(new Etcd3({ hosts }))\`, one etcd3 client over every
member, its stock options); tokens are the lock keys' \`create_revision\`. Two faults side by side:

- kill -9 of the Raft leader (asked of the members, \`/v3/maintenance/status\`), recorded from the
  kill until the two others agree on a new one; the killed member starts again on its data
  directory 3-5×TTL later and rejoins as a follower; the next kill 1-2 s after the cluster is
  whole again, so never more than one member of three is down and grants go on;
- SIGSTOP of a worker inside a gateway call under a lock for ${ETCD_MIN_LEASE_MS / 1000} s + 0-3×TTL: etcd counts leases in
  whole seconds, at least ${ETCD_MIN_LEASE_MS / 1000} s, so a lock of TTL ${TTL_MS} ms lives on a ${ETCD_MIN_LEASE_MS / 1000} s lease, and only a freeze past it
  lets another worker in. The frozen holder is told (\`lost\`) when it wakes; its late writes are
  refused by the fence.

Judged: fenced 0 violations; tokens that always increase in **both** runs (a revision is Raft's,
whatever the lock is used for, and survives a leader change); in every run at least one leader
kill and one freeze. Lock-only's violations are shown. **Recovery** is from the end of each fault
(a new leader elected, or the frozen holder woken) to the next grant. \`slow\`: in \`npm run chaos\`,
not in the CI suite of \`npm test\`.
`
}

function electionSection(electionTable: string): string {
  return `
## Leader election: the leader paused past its lease

\`apps/chaos/src/election.ts\`: 3 candidate processes (\`locker.lead()\`, each its own Locker, Redis connection and
PostgreSQL pool, a redis-server and a schema of their own, the rows under the database guard). The
leaders write their term to one row the whole time. ${ELECTION_PAUSES} times per run the current leader is frozen
(SIGSTOP, between two of its writes) for 1-3 × its lease (300 ms), a successor is elected and writes, and the frozen one wakes
with a write in flight under the term it was elected with. **Fenced**, every write of a leader sets
its term as the transaction's token (\`SET_FENCE_TOKEN_SQL\` of \`@fencelock/fencing/pg\`, the database guard's
path for any client, here \`pg\`): the database must accept no write of a deposed leader
after its successor's (0 out of term order) and must have refused some (the pauses bit). **Unfenced**, the
same code with plain transactions: some land out of order. Leases are checked from the outside on the
machine's monotonic clock: **valid** leases (until demotion or the end of their validity) never
overlap and terms increase; leases **as believed** (until the frozen leader was told) do overlap —
the reason the writes must be fenced.

${electionTable}
`
}

function failoverSection(failoverTable: string): string {
  return `
## Failover: Redis Sentinel and Redis Cluster

Three scenarios run the workers on a highly available deployment the devkit spawns instead of one
redis-server, through ioredis's own clients (\`new Redis({ sentinels, name })\`, \`new Cluster(nodes)\`):

- \`sentinel-failover\`: a primary, 2 replicas, 3 Sentinels (quorum 2, \`down-after-milliseconds\`
  1 000). The primary is killed (kill -9); once the Sentinels named a new one, the killed server
  comes back empty and the Sentinels make it a replica; 1.5-2.5 s after the new primary has a
  replica in sync, again.
- \`cluster-primary-kill\`: 3 primaries with a replica each (\`cluster-node-timeout\` 1 000). The
  primary of the shard that owns \`product:flash-2\` (locked all run long) is killed; its replica
  takes over; the killed node restarts with its nodes.conf and rejoins as a replica; again.
- \`cluster-manual-failover\`: \`CLUSTER FAILOVER\` sent to that shard's replica (the replica
  catches up, then takes over: nothing acknowledged is lost), every 2-3 s, the roles swapping.

The fenced run's Lockers take \`replicas: 1\` (a grant counts once a replica acknowledged it, so a
failover keeps it and its token counter); the lock-only run's take none, which is what a lock alone
gives. **Recovery** is from the kill (or the \`CLUSTER FAILOVER\`) to the next grant of a resource of
that shard: the first grant on the new primary (grants on the other shards do not count). Fenced
must show 0 violations and tokens that always increase; lock-only is shown. An overlap under a
failover is a holder whose renewals could not reach a primary for longer than its TTL
(${TTL_MS} ms; a Sentinel failover takes seconds) while its section went on: it is told (\`lost\`,
\`lock.signal\`) at its next renewal; fencing makes its late writes harmless.

${failoverTable}
`
}

/** Scenarios whose runs are longer than the suite's duration, as `name ≥ N s`. */
function longer(): string {
  return SCENARIOS.filter((s) => s.minDurationMs !== undefined).map((s) => `\`${s.name}\` ≥ ${(s.minDurationMs as number) / 1000} s`).join(', ')
}

function quorumSection(quorumTable: string): string {
  return `
## Quorum mode: a majority of the nodes down

The \`quorum\` scenario runs the workers' \`Locker\` over ${QUORUM_NODES} independent redis-servers (a majority of
${Math.floor(QUORUM_NODES / 2) + 1} must grant), one ioredis client per node with ioredis's stock options. In turn: a majority down
for wait + 2×TTL (part killed and part SIGSTOPped, then all SIGSTOPped, then all killed); then one node at
a time killed (back, empty, after 1.5-3×TTL), restarted without persistence (aimed at a lock held on
exactly a majority that includes it), SIGSTOPped for 1.5-3×TTL; and again.

The table above counts its runs like any other. This one counts the acquires asked while the nodes
were down for sure (from after the kill or SIGSTOP took effect to before they were brought back), by
how each ended. With a majority down no lock may be granted, and every acquire must end with the
lock's typed error (\`LockUnavailableError\`; \`LockTimeoutError\` when the node still up said the lock was
held) within its wait (${WAIT_MS} ms) plus ${OUTAGE_SLACK_MS} ms, less the time its own process did not run (its event
loop's stalls: no deadline fires in a process that does not run). "Granted after" are waits that
outlasted the outage. The last column sorts the overlaps by how the first holder's lock was lost:
**not-owner** is a lock taken from a running holder, its key gone from a majority (the aimed restart
leaves a holder granted while another node was down with its key on one node only: the hole Redlock
closes with delayed restarts, which the workers' Lockers do themselves — a node whose connection
comes back after a restart sits out acquires for \`nodeRestartDelayMs\`, by default the TTL — so a
not-owner overlap here means that guard failed), told at the watchdog's next renewal if the section lasts that long;
**expired** is a lease that ran out before a renewal succeeded (a majority down, or a starved worker).
Fencing makes both harmless. Every cell reads \`fenced / lock-only\` or \`fenced; lock-only\`.

${quorumTable}
`
}

/**
 * The sections of the report a chaos run does not measure (the flash sale's killed instances,
 * with the worker-kill-9 figures written next to them by hand), kept from the file being
 * replaced, from their heading to the end.
 */
function keptSections(file: string): string {
  if (!existsSync(file)) return ''
  const text = readFileSync(file, 'utf8')
  // A function, not a module constant: the command runs at the top-level await above, before
  // constants declared down here are initialised.
  const at = text.indexOf('## An instance killed mid-sale')
  return at === -1 ? '' : `\n${text.slice(at)}`
}
