/**
 * `npm run chaos`: every scenario, fenced then lock-only, checked, and the table written to
 * docs/RELIABILITY.md. Exit codes: 0 all pass; 1 a scenario fails its acceptance (see `verdict`);
 * 2 a bad command line (`npm run chaos -- --help`).
 *
 *   npm run chaos                      # the full set (15 s of faults per run), writes docs/RELIABILITY.md
 *   npm run chaos -- --short           # the CI version (5 s per run), prints the table only
 *   npm run chaos -- --only redis-stall,clock-jump --duration-ms 10000 --verbose
 */
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { EXIT_CODES, integerFlag, runCommand, stringFlag, UsageError, type CliSpec } from '@fencelock/devkit/cli'
import { describeMachine, formatTable } from './reliability-report.js'
import { SCENARIOS } from './scenarios.js'
import { runSuite } from './suite.js'

const RELIABILITY_MD = fileURLToPath(new URL('../../../docs/RELIABILITY.md', import.meta.url))

export const CHAOS_CLI: CliSpec = {
  command: 'npm run chaos --',
  summary: 'Every fault scenario, fenced then lock-only, each run checked from its recorded history and the stores; the table on stdout, and in docs/RELIABILITY.md for a full run.',
  flags: {
    short: { type: 'boolean', description: 'the CI version: 5 s of faults per run, table printed only' },
    'duration-ms': { type: 'string', value: '<n>', description: 'faults per run, ms, 1000-600000', default: '15000, 5000 with --short' },
    only: { type: 'string', value: '<a,b>', description: `scenarios to run: ${SCENARIOS.map((s) => s.name).join(', ')}` },
    out: { type: 'string', value: '<file>', description: 'where to write the report', default: 'docs/RELIABILITY.md' },
    'no-write': { type: 'boolean', description: 'write no report' },
    verbose: { type: 'boolean', description: "show the workers' and the gateway's logs" },
  },
  notes: `REDIS_SERVER_BIN (default redis-server), DATABASE_URL (default: the machine's PostgreSQL, else embedded), CHAOS_LIBFAKETIME.
Exit codes: 0 every scenario passes; 1 a scenario failed its acceptance; 2 a bad command line; 130 interrupted.`,
}

await runCommand(CHAOS_CLI, process.argv.slice(2), async (values) => {
  const short = values.short === true
  const durationMs = integerFlag(values, 'duration-ms', short ? 5_000 : 15_000, 1_000, 600_000)
  const onlyText = stringFlag(values, 'only')
  const only = onlyText?.split(',').map((name) => name.trim())
  const known = new Set(SCENARIOS.map((s) => s.name))
  const unknown = only?.filter((name) => !known.has(name)) ?? []
  if (unknown.length > 0) throw new UsageError(`--only: unknown scenario ${unknown.join(', ')}; known: ${[...known].join(', ')}`)
  if (values['no-write'] === true && values.out !== undefined) throw new UsageError('--out and --no-write exclude each other')
  const outText = stringFlag(values, 'out')
  const out = values['no-write'] === true || (short && outText === undefined) ? undefined : (outText ?? RELIABILITY_MD)
  const args = process.argv.slice(2)
  const command = `npm run chaos${args.length ? ` -- ${args.join(' ')}` : ''}`
  process.on('SIGINT', () => {
    // Workers, gateways and redis-servers are killed by their exit hooks.
    console.error('\nchaos: interrupted')
    process.exit(EXIT_CODES.interrupted)
  })

  const began = performance.now()
  const outcomes = await runSuite({
    durationMs,
    ...(only ? { only } : {}),
    verbose: values.verbose === true,
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
  return failed.length === 0 ? EXIT_CODES.ok : EXIT_CODES.failed
})

function reliabilityDoc(table: string, command: string, durationMs: number, seconds: number): string {
  return `# Reliability: FenceLock under faults

Measured by \`${command}\` on ${new Date().toISOString().slice(0, 10)}, ${describeMachine()}; ${(seconds / 60).toFixed(1)} min in all.

Each scenario runs twice, **fenced** (lock + \`fencedTransaction\`) and **lock-only** (the same
lock, plain transactions), each run with 3 worker processes (3 concurrent clients each) running
the demo shop's purchase and payment code against a \`redis-server\` the suite spawned for that run,
a PostgreSQL schema of its own and a payment gateway process of its own (its ledger in that
schema; the faults never touch it), for ${durationMs / 1000} s of faults. TTL 500 ms. Every cell reads
\`fenced / lock-only\`. How the suite works, and what each column means: \`apps/chaos/README.md\`.

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
