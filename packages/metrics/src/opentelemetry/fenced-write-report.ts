/**
 * What a fenced write reports, accepted or refused: the fields this package reads. Declared here,
 * structurally, so no fencing package is needed to compile against it. `@fencelock/fencing`'s
 * `onRejection` hook reports refusals today (pass `onFencingRejection`, which adds
 * `outcome: 'refused'`); a hook of the same shape for every write, accepted ones included, is
 * what `onFencedWrite` takes.
 */
export interface FencedWriteReport {
  /** The model written, e.g. `Product`: the `fencelock.fencing.model` attribute (bounded by `maxModels`). */
  readonly model: string
  /** The operation, e.g. `update`. */
  readonly operation: string
  /** The writer's fencing token. */
  readonly token: bigint
  /** `accepted`: the database took the write; `refused`: the row's token was newer. */
  readonly outcome: 'accepted' | 'refused'
  /** The token stored on the row, when the writer knows it (a refusal reads it; an accepted write usually does not). */
  readonly storedToken: bigint | undefined
  /**
   * How long the write took, in milliseconds of the monotonic clock, when the reporter measured it:
   * its span then starts that long before the report. Without it the span is an instant.
   */
  readonly durationMs?: number | undefined
}
