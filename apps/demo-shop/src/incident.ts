/**
 * One incident of a sale, drawn from what the sale recorded: a pause of the chaos (who was
 * frozen, holding which lock and token, from when to when) and the instances' own event logs
 * (incident-log.ts: lock grants and renewals, the gateway's answers, the database's answers).
 *
 * The story: holder A (token N) is frozen → its lease runs out (its last renewal + the TTL) →
 * B takes the lock with a newer token M and does the work → A wakes up → with fencing, the
 * database refuses A's write and the gateway answers a repeated charge from its idempotency
 * record (or refuses A's old token); with the lock alone, A's stale write is accepted and the
 * order is charged twice. Nothing here is inferred from what should happen: every step is an
 * event some process recorded.
 */
import type { PauseRecord } from './chaos.js'
import type { IncidentStep, IncidentView } from './dashboard/wire.js'
import type { RecordedEvent } from './incident-log.js'
import type { ProtectionMode } from './protection.js'

/** An incident before it is given its run's id. */
export type SaleIncident = Omit<IncidentView, 'runId'>

/** The incident of a sale, or why there is none. */
export interface IncidentResult {
  readonly incident: SaleIncident | null
  readonly reason: string | null
}

/** What {@link buildIncident} reads. */
export interface IncidentInput {
  readonly mode: ProtectionMode
  readonly ttlMs: number
  /** The sale's start (its crowd's first buyer), epoch ms: step times are counted from it. */
  readonly saleStartMs: number
  readonly pauses: readonly PauseRecord[]
  readonly events: readonly RecordedEvent[]
}

type ChargeEvent = Extract<RecordedEvent, { kind: 'charge' }>
type WriteEvent = Extract<RecordedEvent, { kind: 'write' }>
type Step = Omit<IncidentStep, 'atMs'> & { readonly at: number }

const WRITES = {
  order: (orderId: number | null) =>
    orderId === null
      ? 'takes a unit off the stock and creates an order'
      : `takes a unit off the stock and creates order #${orderId}`,
  intent: (orderId: number | null) => `records the payment intent of order #${orderId ?? '?'}`,
  payment: (orderId: number | null) => `marks order #${orderId ?? '?'} paid and records a payment`,
}

function chargeStep(actor: 'A' | 'B', e: ChargeEvent, stale: boolean, replayedTo?: string): Step {
  const who = `${e.instance}'s charge of order #${e.orderId}`
  const base = { actor, instance: e.instance, token: e.token, kind: 'charge' as const, at: e.atMs }
  switch (e.outcome) {
    case 'charged':
      return {
        ...base,
        outcome: stale ? 'stale-accepted' : 'ok',
        text: stale
          ? `${e.instance} gets the gateway's answer to its charge: a new charge (${e.chargeId}), so order #${e.orderId} is charged twice`
          : actor === 'A'
            ? `${e.instance} gets the answer to the charge it sent before it froze: ${e.chargeId}${replayedTo ? ` — the charge the gateway replayed to ${replayedTo}: one charge in all` : ''}`
            : `the gateway charges order #${e.orderId} for ${e.instance} (${e.chargeId})`,
      }
    case 'replayed':
      return {
        ...base,
        outcome: 'replayed',
        text: `the gateway answers ${who} from the key's idempotency record: the first charge again (${e.chargeId}), no new money moved`,
      }
    case 'refused-stale':
      return {
        ...base,
        outcome: 'refused',
        text: `the gateway refuses ${who}: token ${e.token} is older than the newest it has seen for this order (409 stale_fencing_token)`,
      }
    case 'key-reused':
      return {
        ...base,
        outcome: 'refused',
        text: `the gateway refuses ${who}: its key was used with other parameters (422)`,
      }
    case 'failed':
      return { ...base, outcome: 'ok', text: `${who} failed (no answer from the gateway)` }
  }
}

function writeStep(actor: 'A' | 'B', e: WriteEvent, stale: boolean): Step {
  const base = { actor, instance: e.instance, token: e.token, kind: 'write' as const, at: e.atMs }
  if (e.outcome === 'refused')
    return {
      ...base,
      outcome: 'refused',
      text: `the database refuses ${e.instance}'s write (it ${WRITES[e.what](e.orderId)}): token ${e.token} is older than the row's ${e.storedToken ?? 'newer token'}`,
    }
  return stale
    ? {
        ...base,
        outcome: 'stale-accepted',
        text: `the database accepts ${e.instance}'s stale write: it ${WRITES[e.what](e.orderId)} with token ${e.token ?? '-'}, its lease long gone`,
      }
    : { ...base, outcome: 'ok', text: `${e.instance} ${WRITES[e.what](e.orderId)}` }
}

interface Candidate {
  readonly incident: SaleIncident
  readonly score: number
}

function candidateOf(pause: PauseRecord, input: IncidentInput): Candidate | undefined {
  if (pause.token === null) return undefined
  const a = pause.instance
  const n = BigInt(pause.token)
  const on = input.events.filter((e) => e.resource === pause.resource).sort((x, y) => x.atMs - y.atMs)
  const aHolds = (e: RecordedEvent) => e.instance === a && e.token === pause.token
  const lockOf = (e: RecordedEvent) => (e.kind === 'lock' ? e : undefined)

  const aGrant = on.filter((e) => aHolds(e) && lockOf(e)?.what === 'acquired' && e.atMs <= pause.frozenAtMs).at(-1)
  const aRenewal = on
    .filter(
      (e) =>
        aHolds(e) && (lockOf(e)?.what === 'acquired' || lockOf(e)?.what === 'extended') && e.atMs <= pause.frozenAtMs,
    )
    .at(-1)
  // A renewal sent just before the freeze is answered (and recorded) only after the wake: Redis
  // applied it at some moment before the freeze, so the lease's end is known only to be before B's grant.
  const lateRenewal = on.some((e) => aHolds(e) && lockOf(e)?.what === 'extended' && e.atMs > pause.frozenAtMs)
  const leaseEnd =
    aRenewal === undefined
      ? undefined
      : aRenewal.atMs + ((aRenewal.kind === 'lock' ? aRenewal.ttlMs : null) ?? input.ttlMs)
  const bGrant = on.find(
    (e) =>
      e.kind === 'lock' &&
      e.what === 'acquired' &&
      e.instance !== a &&
      e.token !== null &&
      BigInt(e.token) > n &&
      e.atMs >= pause.frozenAtMs,
  )
  const bRelease =
    bGrant &&
    on.find(
      (e) =>
        e.kind === 'lock' &&
        e.what !== 'acquired' &&
        e.what !== 'extended' &&
        e.instance === bGrant.instance &&
        e.token === bGrant.token &&
        e.atMs >= bGrant.atMs,
    )
  const bWork = bGrant
    ? on.filter(
        (e) =>
          (e.kind === 'charge' || e.kind === 'write') &&
          e.instance === bGrant.instance &&
          e.token === bGrant.token &&
          e.atMs >= bGrant.atMs &&
          e.atMs <= (bRelease?.atMs ?? Infinity),
      )
    : []
  const aWork = on.filter((e) => (e.kind === 'charge' || e.kind === 'write') && aHolds(e) && e.atMs >= pause.frozenAtMs)
  const aLost = on.find((e) => aHolds(e) && lockOf(e)?.what === 'lost' && e.atMs >= pause.frozenAtMs)

  // Steps are ordered by time, with two facts kept whatever the clocks say: the lease ran out
  // before B's grant (Redis granted B), and A reports its lock lost only once continued.
  const steps: Step[] = []
  const op = pause.operation === 'charge' ? 'charge' : 'authorize'
  if (aGrant)
    steps.push({
      at: aGrant.atMs,
      actor: 'A',
      instance: a,
      token: pause.token,
      kind: 'acquired',
      outcome: 'ok',
      text: `${a} takes the lock ${pause.resource} with token ${n}`,
    })
  steps.push({
    at: pause.frozenAtMs,
    actor: 'chaos',
    instance: a,
    token: pause.token,
    kind: 'frozen',
    outcome: 'ok',
    text: `${a} is frozen (SIGSTOP) inside its ${op === 'charge' ? 'charge at the gateway' : 'card authorization'}, holding token ${n}`,
  })
  if (leaseEnd !== undefined)
    steps.push({
      at: bGrant === undefined ? leaseEnd : lateRenewal ? bGrant.atMs : Math.min(leaseEnd, bGrant.atMs),
      actor: 'A',
      instance: a,
      token: pause.token,
      kind: 'lease-expired',
      outcome: 'ok',
      text:
        lateRenewal && bGrant !== undefined
          ? `${a}'s lease (token ${n}) has run out by now at the latest (a renewal sent just before the freeze was answered only after it): its watchdog is frozen with it and renews nothing`
          : `${a}'s lease (token ${n}) runs out: its watchdog is frozen with it and renews nothing`,
    })
  if (bGrant)
    steps.push({
      at: bGrant.atMs,
      actor: 'B',
      instance: bGrant.instance,
      token: bGrant.token,
      kind: 'acquired',
      outcome: 'ok',
      text: `${bGrant.instance} takes ${pause.resource} with token ${bGrant.token}`,
    })
  for (const e of bWork.slice(0, 4))
    steps.push(e.kind === 'charge' ? chargeStep('B', e, false) : writeStep('B', e as WriteEvent, false))
  if (pause.resumedAtMs !== null)
    steps.push({
      at: pause.resumedAtMs,
      actor: 'chaos',
      instance: a,
      token: pause.token,
      kind: 'resumed',
      outcome: 'ok',
      text: `${a} is continued (SIGCONT) after ${Math.round(pause.resumedAtMs - pause.frozenAtMs)} ms and goes on, still believing it holds token ${n}`,
    })
  // After the takeover, what A does is stale whatever the store says of it.
  const stale = bGrant !== undefined
  const replayed = bWork.find((e): e is ChargeEvent => e.kind === 'charge' && e.outcome === 'replayed')
  for (const e of aWork.slice(0, 4))
    steps.push(
      e.kind === 'charge'
        ? chargeStep(
            'A',
            e,
            stale && isSecondCharge(e, bWork),
            replayed?.chargeId === e.chargeId ? replayed?.instance : undefined,
          )
        : writeStep('A', e as WriteEvent, stale),
    )
  if (aLost)
    steps.push({
      at: Math.max(aLost.atMs, pause.resumedAtMs ?? aLost.atMs),
      actor: 'A',
      instance: a,
      token: pause.token,
      kind: 'lost',
      outcome: 'ok',
      text: `${a}'s lock reports the lease lost (token ${n})`,
    })

  const aWrites = aWork.filter((e): e is WriteEvent => e.kind === 'write')
  const aCharges = aWork.filter((e): e is ChargeEvent => e.kind === 'charge')
  const bCharges = bWork.filter((e): e is ChargeEvent => e.kind === 'charge')
  const refused = aWrites.some((e) => e.outcome === 'refused') || aCharges.some((e) => e.outcome === 'refused-stale')
  const secondCharge =
    stale && aCharges.some((e) => e.outcome === 'charged') && bCharges.some((e) => e.outcome === 'charged')
  const staleAccepted = stale && aWrites.some((e) => e.outcome === 'accepted')
  const ending: SaleIncident['ending'] = refused
    ? 'refused'
    : secondCharge
      ? 'second-charge'
      : staleAccepted
        ? 'stale-write-accepted'
        : 'incomplete'

  const b = bGrant ? { instance: bGrant.instance, token: bGrant.token as string } : null
  const replayedBy = [...bCharges, ...aCharges].find((e) => e.outcome === 'replayed')
  const summary = summaryOf({
    a,
    n: String(n),
    b,
    ending,
    replayedBy: replayedBy?.instance,
    aChargeRefused: aCharges.some((e) => e.outcome === 'refused-stale'),
    aWriteRefused: aWrites.some((e) => e.outcome === 'refused'),
  })
  const score =
    (bGrant ? 8 : 0) + (aWrites.length > 0 ? 4 : 0) + (ending !== 'incomplete' ? 2 : 0) + (op === 'charge' ? 1 : 0)
  return {
    score,
    incident: {
      mode: input.mode,
      resource: pause.resource,
      operation: op,
      holderA: { instance: a, token: String(n) },
      holderB: b,
      ttlMs: input.ttlMs,
      steps: steps
        .sort((x, y) => x.at - y.at)
        .map(({ at, ...step }) => ({ ...step, atMs: Math.round(at - input.saleStartMs) })),
      ending,
      summary,
      pausesOnHolders: input.pauses.filter((p) => p.token !== null).length,
    },
  }
}

/** A's new charge counts as the second one when B charged the same order (a new charge too). */
function isSecondCharge(e: ChargeEvent, bWork: readonly RecordedEvent[]): boolean {
  return (
    e.outcome === 'charged' &&
    bWork.some((w) => w.kind === 'charge' && w.outcome === 'charged' && w.orderId === e.orderId)
  )
}

function summaryOf(s: {
  a: string
  n: string
  b: { instance: string; token: string } | null
  ending: SaleIncident['ending']
  replayedBy: string | undefined
  aChargeRefused: boolean
  aWriteRefused: boolean
}): string {
  const takeover = s.b ? `${s.b.instance} took over with token ${s.b.token}` : 'nobody took over'
  const opening = `${s.a}'s lease ran out while it was frozen, ${takeover}`
  switch (s.ending) {
    case 'refused': {
      const refusals = [
        s.aChargeRefused ? 'the gateway refused its charge for the old token' : '',
        s.aWriteRefused ? 'the database refused its write' : '',
      ]
      const replay = s.replayedBy
        ? `; the gateway answered ${s.replayedBy}'s charge from the idempotency record, so the order was charged once`
        : ''
      return `Fencing held: ${opening}, and when ${s.a} woke up with token ${s.n} ${refusals.filter(Boolean).join(' and ')}${replay}.`
    }
    case 'second-charge':
      return `The lock alone failed: ${opening}, and ${s.a} woke up with token ${s.n} still believing it held the lock — the gateway charged the order a second time and the shop recorded its stale payment.`
    case 'stale-write-accepted':
      return `The lock alone failed: ${opening}, and ${s.a} woke up with token ${s.n} and wrote anyway — the database accepted the stale write.`
    case 'incomplete':
      return `${opening}; the sale recorded nothing of ${s.a}'s after it woke (its work had finished, or its request had timed out).`
  }
}

/**
 * Picks the sale's most telling incident: a pause of a lock holder followed by a takeover and
 * a write of the frozen holder after it woke, a charge preferred (it shows the gateway's part).
 */
export function buildIncident(input: IncidentInput): IncidentResult {
  if (input.mode === 'unsafe')
    return {
      incident: null,
      reason:
        'No lock in this mode: no holder, no lease, no token, so no takeover to draw — every buyer writes at once.',
    }
  const onHolders = input.pauses.filter((p) => p.token !== null)
  if (onHolders.length === 0)
    return {
      incident: null,
      reason:
        'No pause landed on a lock holder in this sale (the incident is drawn from a holder frozen past its lease: chaos pause).',
    }
  let best: Candidate | undefined
  for (const pause of onHolders) {
    const candidate = candidateOf(pause, input)
    if (candidate !== undefined && (best === undefined || candidate.score > best.score)) best = candidate
  }
  return best === undefined
    ? { incident: null, reason: 'No pause landed on a lock holder in this sale.' }
    : { incident: best.incident, reason: null }
}
