/**
 * What express's body parser threw, for the demo's two HTTP services (the shop and the gateway):
 * each maps it to its own error codes, so a bad body is a 4xx, never a 500.
 */

/** A body-parser failure: the body was too large, not valid JSON, or otherwise unreadable. */
export interface BodyParserFailure {
  readonly kind: 'too-large' | 'malformed' | 'unreadable'
  /** The 4xx status body-parser chose. */
  readonly status: number
}

/** The body-parser failure `error` is (they carry `type` and a 4xx `status`), or `undefined`. */
export function bodyParserFailure(error: unknown): BodyParserFailure | undefined {
  if (error === null || typeof error !== 'object') return undefined
  const { type, status } = error as { type?: unknown; status?: unknown }
  if (type === 'entity.too.large') return { kind: 'too-large', status: 413 }
  if (type === 'entity.parse.failed') return { kind: 'malformed', status: 400 }
  if (typeof type === 'string' && typeof status === 'number' && status >= 400 && status < 500) return { kind: 'unreadable', status }
  return undefined
}
