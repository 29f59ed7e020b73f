/**
 * `npm run chaos`: every scenario, fenced then lock-only, checked, and the table written to
 * docs/RELIABILITY.md. Exit code 1 when a scenario fails its acceptance (see `verdict`).
 *
 *   npm run chaos                      # the full set (15 s of faults per run), writes docs/RELIABILITY.md
 *   npm run chaos -- --short           # the CI version (5 s per run), prints the table only
 *   npm run chaos -- --only redis-stall,clock-jump --duration-ms 10000 --verbose
 */
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describeMachine, formatTable } from './reliability-report.js'
import { runSuite } from './suite.js'

const USAGE = 'usage: run-chaos [--short] [--duration-ms <n>] [--only <a,b>] [--out <file> | --no-write] [--verbose]'

async function main(): Promise<number> {
  const args = process.argv.slice(2)
  const flag = (name: string) => args.includes(name)
  const value = (name: string) => {
    const i = args.indexOf(name)
    return i === -1 ? undefined : args[i + 1]
  }
  if (flag('--help')) {
    console.log(USAGE)
    return 0
  }
  const short = flag('--short')
  const durationMs = Number(value('--duration-ms') ?? (short ? 5_000 : 15_000))
  if (!Number.isInteger(durationMs) || durationMs < 1_000) {
    console.error(`--duration-ms must be an integer ≥ 1000\n${USAGE}`)
    return 2
  }
  const only = value('--only')?.split(',')
  const out = flag('--no-write') || (short && value('--out') === undefined) ? undefined : (value('--out') ?? fileURLToPath(new URL('../../../docs/RELIABILITY.md', import.meta.url)))
  const command = `npm run chaos${args.length ? ` -- ${args.join(' ')}` : ''}`

  const began = performance.now()
  const outcomes = await runSuite({
    durationMs,
    ...(only ? { only } : {}),
    verbose: flag('--verbose'),
    onRun: (r) =>
      console.error(
        `  ${r.scenario} ${r.mode}: ${r.check.operations} ops, ${r.check.overlaps.length} overlaps, ${r.check.safetyViolations} violations (${r.check.doubleChargedOrders} order${r.check.doubleChargedOrders === 1 ? '' : 's'} charged twice (gateway ledger); ${r.check.gatewayCharges} charges, ${r.check.payments} payments recorded), ${r.check.faults} faults (${r.seconds.toFixed(1)} s)`,
      ),
  })
  const seconds = (performance.now() - began) / 1000
  const table = formatTable(outcomes)
  console.log(table)
  const failed = outcomes.filter((o) => o.problems.length > 0)
  console.log(`\n${outcomes.length - failed.length} of ${outcomes.length} scenarios pass — ${seconds.toFixed(0)} s`)
  if (out !== undefined) {
    writeFileSync(out, reliabilityDoc(table, command, durationMs, seconds))
    console.error(`written: ${out}`)
  }
  return failed.length === 0 ? 0 : 1
}

function reliabilityDoc(table: string, command: string, durationMs: number, seconds: number): string {
  return `# Reliability: FenceLock under faults

Measured by \`${command}\` on ${new Date().toISOString().slice(0, 10)}, ${describeMachine()}; ${(seconds / 60).toFixed(1)} min in all.

Each scenario runs twice, **fenced** (lock + \`fencedTransaction\`) and **lock-only** (the same
lock, plain transactions), each run with 3 worker processes (3 concurrent clients each) running
the demo shop's purchase and payment code against a \`redis-server\` the suite spawned for that run,
a PostgreSQL schema of its own and a payment gateway process of its own (its ledger in that
schema; the faults never touch it), for ${durationMs / 1000} s of faults. TTL 500 ms. Every cell reads
\`fenced / lock-only\`. How the suite works, and what each column means: \`packages/chaos/README.md\`.

${table}

- **overlapping sections**: two holders of one lock inside their critical sections at once
  (CLOCK_MONOTONIC). The lock alone cannot prevent it under a pause; fencing makes it harmless.
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
  bite), or when the clock jump changes anything.
`
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : String(error))
    process.exit(1)
  },
)
