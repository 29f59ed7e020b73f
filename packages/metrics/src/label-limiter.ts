/** Label value that every group or model past the cap is counted under. */
export const OTHER_LABEL = 'other'

/**
 * Longest label value kept, in UTF-16 code units. Longer values are cut: a label value is a
 * name for a dashboard legend, and a long one is almost always an id that slipped through.
 */
export const MAX_LABEL_CHARS = 64

/**
 * The default `groupOf`: the text before the first `:` (`order:42` → `order`), or the whole
 * resource when it has none. The result is then cut to {@link MAX_LABEL_CHARS} and counted
 * against `maxGroups`, so even resources without a `:` (`order42`, `order43`, ...) cannot grow
 * the number of series past the cap: the groups after the first `maxGroups` become `other`.
 */
export function defaultGroupOf(resource: string): string {
  const colon = resource.indexOf(':')
  return colon === -1 ? resource : resource.slice(0, colon)
}

/**
 * What `groupOf` maps `resource` to, `undefined` when it throws (which {@link LabelLimiter.admit}
 * then counts as `other`): a mapping bug must not break locking or lose the event.
 */
export function groupFor(groupOf: (resource: string) => unknown, resource: string): unknown {
  try {
    return groupOf(resource)
  } catch {
    return undefined
  }
}

/** Cuts a label value to {@link MAX_LABEL_CHARS} without splitting a surrogate pair. */
export function truncateLabel(value: string): string {
  if (value.length <= MAX_LABEL_CHARS) return value
  const code = value.charCodeAt(MAX_LABEL_CHARS - 1)
  // A high surrogate at the cut would leave half a character: invalid UTF-8 in the exposition.
  const end = code >= 0xd800 && code <= 0xdbff ? MAX_LABEL_CHARS - 1 : MAX_LABEL_CHARS
  return value.slice(0, end)
}

/**
 * Admits at most `max` distinct label values; any value after that is folded into
 * {@link OTHER_LABEL}. This bounds the series a process can create whatever the resources are:
 * Prometheus keeps every label value it ever saw, so an unbounded label is an outage of the
 * monitoring, not a cosmetic problem.
 */
export class LabelLimiter {
  readonly #admitted = new Set<string>()

  /** The values admitted so far, in order of first sight. */
  get admitted(): ReadonlySet<string> {
    return this.#admitted
  }

  /**
   * @param value a candidate label value; anything but a non-empty string becomes `other`.
   * @param max how many distinct values may be admitted (`other` is not counted).
   * @returns the value itself (cut to length) when admitted, else `other`.
   */
  admit(value: unknown, max: number): string {
    if (typeof value !== 'string' || value.length === 0) return OTHER_LABEL
    const label = truncateLabel(value)
    if (label === OTHER_LABEL || this.#admitted.has(label)) return label
    if (this.#admitted.size >= max) return OTHER_LABEL
    this.#admitted.add(label)
    return label
  }
}
