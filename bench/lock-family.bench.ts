// `npm run bench:lock-family`: the lock family's rows (issue 22), on a redis-server of its own:
// - a reentrant re-acquire inside using(): ops/s, and the Redis commands it makes (INFO
//   commandstats delta: it must be 0);
// - acquireAll of 3 resources against 3 sequential acquires of the same 3 (and their releases),
//   uncontended, one worker, in interleaved rounds so drift hits both alike;
// - a semaphore with 3 permits under 20 contending workers (a Locker each), each holding its
//   permit 2 ms: acquires/s, wait p99, fewest and most acquires per worker; next to it, the same
//   20 workers on one lock (1 holder at a time), for scale.
// Writes its section of docs/BENCHMARKS.md (between the bench:lock-family markers).
//
//   npm run bench:lock-family                      full run (5 rounds × 3 s per row)
//   npm run bench:lock-family -- --quick --no-write  (1 round × 1 s), file untouched
import { commandLineOrExit, EXIT_CODES, type CliSpec } from '@fencelock/devkit/cli'
import { Locker } from '@fencelock/lock'
import { Redis } from 'ioredis'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { exitUnlessRedisServerRuns } from './support/can-start.js'
import { writeMarkedSection } from './support/docs-section.js'
import { loadAverage, machineInfo } from './support/machine.js'
import { startRedisServer } from './support/redis-server.js'
import { median, quantile } from './support/stats.js'

const CLI: CliSpec = {
  command: 'npm run bench:lock-family --',
  summary:
    "The lock family's rows on a redis-server of its own: a reentrant re-acquire (ops/s, Redis commands: 0), acquireAll of 3 resources against 3 sequential acquires, a 3-permit semaphore under 20 workers. Writes its section of docs/BENCHMARKS.md.",
  flags: {
    quick: { type: 'boolean', description: '1 round of 1 s per row instead of 5 of 3 s' },
    'no-write': { type: 'boolean', description: 'leave docs/BENCHMARKS.md untouched' },
  },
  notes: 'REDIS_SERVER_BIN (default redis-server).',
  failure: 'it broke off with an error',
}

const { quick, write } = commandLineOrExit(CLI, process.argv.slice(2), (values) => ({
  quick: values.quick === true,
  write: values['no-write'] !== true,
}))
exitUnlessRedisServerRuns('bench:lock-family')

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const rounds = quick ? 1 : 5
const roundMs = quick ? 1_000 : 3_000

/** Commands the server ran (INFO commandstats, less INFO itself); `scripts`: only EVALSHA/EVAL, one per round trip of ours. */
async function commands(redis: Redis, scripts = false): Promise<number> {
  const info = await redis.info('commandstats')
  let n = 0
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (scripts ? m[1] === 'evalsha' || m[1] === 'eval' : m[1] !== 'info') n += Number(m[2])
  }
  return n
}

/** Runs `op` back to back for `ms`; returns ops/s. */
async function rate(ms: number, op: () => Promise<void>): Promise<number> {
  const start = performance.now()
  let n = 0
  while (performance.now() - start < ms) {
    await op()
    n++
  }
  return n / ((performance.now() - start) / 1000)
}

const server = await startRedisServer()
// Interrupted (Ctrl-C, or bench:lock stopping): exit with the signal's code; the redis-server goes with the process.
for (const [signal, code] of [['SIGINT', EXIT_CODES.interrupted], ['SIGTERM', EXIT_CODES.terminated]] as const) {
  process.once(signal, () => process.exit(code))
}
const redis = new Redis({ host: server.host, port: server.port })
const locker = new Locker(redis)
try {
  // Reentrant re-acquire.
  const reentrant: number[] = []
  let reentrantCommands = 0
  let reentrantOps = 0
  for (let round = 0; round < rounds; round++) {
    await locker.using(`family:reenter:${round}`, async () => {
      const before = await commands(redis)
      reentrant.push(
        await rate(roundMs, async () => {
          const inner = await locker.acquire(`family:reenter:${round}`)
          await inner.release()
          reentrantOps++
        }),
      )
      reentrantCommands += (await commands(redis)) - before
    })
  }

  // acquireAll of 3 against 3 sequential acquires.
  const names = ['family:a', 'family:b', 'family:c']
  const all: number[] = []
  const sequential: number[] = []
  let allCommands = 0
  let allOps = 0
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? ['all', 'seq'] : ['seq', 'all']
    for (const which of order) {
      if (which === 'all') {
        const before = await commands(redis, true)
        let n = 0
        all.push(
          await rate(roundMs, async () => {
            await (await locker.acquireAll(names)).release()
            n++
          }),
        )
        allCommands += (await commands(redis, true)) - before
        allOps += n
      } else {
        sequential.push(
          await rate(roundMs, async () => {
            const locks = [
              await locker.acquire(names[0]!),
              await locker.acquire(names[1]!),
              await locker.acquire(names[2]!),
            ]
            await Promise.all(locks.map((lock) => lock.release()))
          }),
        )
      }
    }
  }

  // A semaphore with 3 permits, 20 workers (a Locker each), against one lock under the same 20.
  const workers = Array.from({ length: 20 }, () => {
    const client = new Redis({ host: server.host, port: server.port })
    return { client, locker: new Locker(client, { ttlMs: 10_000 }) }
  })
  const contended = async (kind: 'semaphore' | 'lock') => {
    const waits: number[] = []
    const perWorker = workers.map(() => 0)
    const name = `family:${kind}:${Math.random().toString(36).slice(2)}`
    const until = performance.now() + roundMs
    const hold = () => new Promise((resolve) => setTimeout(resolve, 2))
    await Promise.all(
      workers.map(async ({ locker }, i) => {
        const semaphore = locker.semaphore(name, { permits: 3 })
        while (performance.now() < until) {
          const asked = performance.now()
          const permit =
            kind === 'semaphore'
              ? await semaphore.acquire({ waitMs: 60_000 })
              : await locker.acquire(name, { waitMs: 60_000 })
          waits.push(performance.now() - asked)
          await hold()
          await permit.release()
          perWorker[i]!++
        }
      }),
    )
    return { waits, perWorker, rate: perWorker.reduce((a, b) => a + b, 0) / (roundMs / 1000) }
  }
  const semaphoreRuns: Awaited<ReturnType<typeof contended>>[] = []
  const lockRuns: Awaited<ReturnType<typeof contended>>[] = []
  for (let round = 0; round < rounds; round++) {
    for (const kind of round % 2 === 0 ? (['semaphore', 'lock'] as const) : (['lock', 'semaphore'] as const)) {
      ;(kind === 'semaphore' ? semaphoreRuns : lockRuns).push(await contended(kind))
    }
  }
  await Promise.all(workers.map(({ locker }) => locker.close()))
  for (const { client } of workers) client.disconnect()
  const summary = (runs: typeof semaphoreRuns) => {
    const waits = runs.flatMap((r) => r.waits)
    // The round whose workers were served least evenly (counts compare within a round only).
    const widest = runs
      .map((r) => ({ fewest: Math.min(...r.perWorker), most: Math.max(...r.perWorker) }))
      .sort((a, b) => a.fewest / a.most - b.fewest / b.most)[0]!
    return {
      rate: median(runs.map((r) => r.rate)),
      p50: quantile(waits, 0.5),
      p99: quantile(waits, 0.99),
      ...widest,
    }
  }
  const sem = summary(semaphoreRuns)
  const one = summary(lockRuns)

  const m = machineInfo()
  const f = (x: number) => Math.round(x).toLocaleString('en-US')
  const body = `## The lock family (issue 22)

- Command: \`npm run bench:lock-family${quick ? ' -- --quick' : ''}\` (\`node --import tsx bench/lock-family.bench.ts\`; also run at the end of \`npm run bench:lock\`): ${rounds} round(s) × ${roundMs / 1000} s per row, one worker, one Locker, a redis-server of its own; medians of the rounds.
- Machine: ${m.nproc} CPUs (${m.cpuModel}), ${m.totalMemGiB} GiB, Node ${m.node}, ${m.redisServer}, ${m.os}; load average at the end ${loadAverage()} (shared with other work: compare rows of this run only).

| row | ops/s (median) | Redis round trips per op |
| --- | ---: | ---: |
| reentrant re-acquire + release inside \`using()\` | ${f(median(reentrant))} | ${reentrantCommands / reentrantOps} (${reentrantCommands} commands of any kind over ${f(reentrantOps)} re-acquires) |
| \`acquireAll\` of 3 + \`release()\` | ${f(median(all))} | ${(allCommands / Math.max(1, allOps)).toFixed(2)} |
| 3 sequential \`acquire\` + 3 releases | ${f(median(sequential))} | 6 |

Contended: 20 workers (a Locker and a client each), each holding what it got for 2 ms (a timer) and asking again at once, ${rounds} round(s) of ${roundMs / 1000} s; waits from the call to the grant, over every round; fewest/most: acquires of one worker, in the round whose workers were served least evenly.

| row | acquires/s (median) | wait p50 ms | wait p99 ms | fewest / most per worker |
| --- | ---: | ---: | ---: | ---: |
| semaphore, 3 permits | ${f(sem.rate)} | ${sem.p50.toFixed(1)} | ${sem.p99.toFixed(1)} | ${sem.fewest} / ${sem.most} |
| one lock (1 holder) | ${f(one.rate)} | ${one.p50.toFixed(1)} | ${one.p99.toFixed(1)} | ${one.fewest} / ${one.most} |

The semaphore lets ${(sem.rate / one.rate).toFixed(2)}× as many acquires through as one lock (3 permits: about ×3 when the holds set the pace — a little more can show, since one lock stands empty during each hand-off while the semaphore's other permits stay held). ${
    sem.rate / one.rate >= 2.7
      ? 'Here they do: its acquires pass one at a time through its queue lock (first come, first served: its holder takes a free permit or waits for the first one released, then hands the queue lock on), about three round trips in sequence per acquire, and that keeps up with 3 holders of 2 ms each.'
      : 'It falls short of ×3: its acquires pass one at a time through its queue lock (first come, first served: its holder takes a free permit or waits for the first one released, then hands the queue lock on), about three round trips in sequence per acquire, and in this run those, not the 2 ms holds, set the pace (a loaded machine stretches each round trip).'
  } Holds much longer than a few round trips (the semaphore's use: a few exports or calls at once) keep all 3 permits busy.

\`acquireAll\` of 3 runs at ${(median(all) / median(sequential)).toFixed(2)}× the rate of 3 sequential acquires: it is those 3 acquires in canonical order (one round trip each, in sequence) plus the set's bookkeeping, and both rows release their 3 locks in parallel, so the two should be about equal: a gap between them measures the machine's drift more than the code. Round trips counted as EVALSHA/EVAL calls in INFO commandstats.
`
  console.log(body)
  if (write) writeMarkedSection(join(root, 'docs', 'BENCHMARKS.md'), 'bench:lock-family', body)
} finally {
  await locker.close()
  redis.disconnect()
  await server.stop()
}
