import { useEffect, useState } from 'react'
import { CHAOS_SHORT, formatCount, MODE_LABELS } from '../format'
import type { IncidentAnswer, IncidentStep, RunView } from '../wire'

/** Reads a run's incident; resolves with the answer, or an error message. */
export type LoadIncident = (runId: number) => Promise<IncidentAnswer | string>

/** `GET /api/runs/:id/incident`. */
export const getIncident: LoadIncident = async (runId) => {
  try {
    const res = await fetch(`/api/runs/${runId}/incident`)
    if (!res.ok) return `the shop answered ${res.status}`
    return (await res.json()) as IncidentAnswer
  } catch {
    return 'the shop did not answer'
  }
}

const OUTCOME_LABELS: Readonly<Record<IncidentStep['outcome'], string>> = Object.freeze({
  ok: '',
  refused: 'refused',
  replayed: 'replayed',
  'stale-accepted': 'stale, accepted',
})

const ENDING_TONES = Object.freeze({
  refused: 'ok',
  'second-charge': 'bad',
  'stale-write-accepted': 'bad',
  incomplete: 'warn',
} as const)

/** The run whose incident is drawn when none was picked: the newest finished one with a lock. */
export function defaultIncidentRun(runs: readonly RunView[]): number | null {
  return runs.find((r) => r.status === 'done' && r.mode !== 'unsafe')?.id ?? null
}

/**
 * One incident of a sale, as a timeline: holder A frozen, its lease running out, B taking the lock
 * with a newer token, A waking — and what the database and the gateway answered each of them.
 * Every step is something the sale recorded (times in ms from the sale's start).
 */
export function IncidentPanel({
  runs,
  runId,
  load = getIncident,
}: {
  runs: readonly RunView[]
  runId: number | null
  load?: LoadIncident
}) {
  const run = runs.find((r) => r.id === runId) ?? null
  const [answer, setAnswer] = useState<{ runId: number; value: IncidentAnswer | string } | null>(null)
  const ready = run !== null && run.status !== 'running'
  useEffect(() => {
    if (runId === null || !ready) return
    let cancelled = false
    void load(runId).then((value) => {
      if (!cancelled) setAnswer({ runId, value })
    })
    return () => {
      cancelled = true
    }
  }, [runId, ready, load])

  const current = answer !== null && answer.runId === runId ? answer.value : null
  const incident = current !== null && typeof current !== 'string' ? current.incident : null
  return (
    <section className="panel incident" aria-labelledby="incident-title" data-run-id={runId ?? undefined}>
      <h2 id="incident-title">
        Incident timeline{' '}
        {run ? (
          <span className="hint">
            sale #{run.id} · {MODE_LABELS[run.mode]} · chaos {CHAOS_SHORT[run.chaos]}
          </span>
        ) : null}
      </h2>
      {run === null ? (
        <p className="empty">
          Run a sale with a lock and chaos “pause”: its incident is drawn here from what the sale recorded — who froze,
          whose lease ran out, who took over with which token, and what the database and the gateway said to each.
        </p>
      ) : !ready ? (
        <p className="empty">Sale #{run.id} is still running: its incident is drawn from its report.</p>
      ) : current === null ? (
        <p className="empty">Loading…</p>
      ) : typeof current === 'string' ? (
        <p className="form-error">Could not load the incident: {current}</p>
      ) : incident === null ? (
        <p className="empty">{current.reason}</p>
      ) : (
        <>
          <p className={`incident-summary tone-${ENDING_TONES[incident.ending]}`}>{incident.summary}</p>
          <p className="hint">
            {incident.resource}: holder A {incident.holderA.instance} (token {incident.holderA.token})
            {incident.holderB ? `, holder B ${incident.holderB.instance} (token ${incident.holderB.token})` : ''} ·
            lease {formatCount(incident.ttlMs)} ms · one of {formatCount(incident.pausesOnHolders)} pause
            {incident.pausesOnHolders === 1 ? '' : 's'} of a lock holder in this sale · times in ms from the sale’s
            start
          </p>
          <ol className="timeline">
            {incident.steps.map((step, i) => (
              <li
                key={i}
                className={`step actor-${step.actor} outcome-${step.outcome}`}
                data-kind={step.kind}
                data-outcome={step.outcome}
              >
                <span className="step-time">{formatCount(step.atMs)} ms</span>
                <span className="step-who">
                  {step.actor === 'chaos' ? 'chaos' : step.actor}
                  {step.instance ? ` · ${step.instance}` : ''}
                  {step.token && step.actor !== 'chaos' ? ` · token ${step.token}` : ''}
                </span>
                <span className="step-text">
                  {step.text}
                  {OUTCOME_LABELS[step.outcome] ? (
                    <strong className="step-outcome"> — {OUTCOME_LABELS[step.outcome]}</strong>
                  ) : null}
                </span>
              </li>
            ))}
          </ol>
        </>
      )}
    </section>
  )
}
