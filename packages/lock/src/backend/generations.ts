/** Resources whose reseed generation a backend keeps (then it starts over: they reseed once more). */
const KEPT = 1_024

/**
 * Which resources have had a grant minted from the server clock too (`reseed`,
 * scripts/mint-token.ts) in the connection's current generation (connection.ts). After a
 * reconnection or a change of topology — every failover causes one — the counter on the server
 * may have gone back (a replica that had not seen the latest grants), so the first grant of each
 * resource in a new generation mints `max(INCR, clock)`.
 */
export class Reseeds {
  readonly #seeded = new Map<string, number>()

  /** Whether a try for `resource` sent in `generation` must mint from the clock too. */
  needed(resource: string, generation: number): boolean {
    return this.#seeded.get(resource) !== generation
  }

  /** A reseeding try for `resource`, sent in `generation`, was granted. */
  done(resource: string, generation: number): void {
    if (this.#seeded.size >= KEPT) this.#seeded.clear()
    this.#seeded.set(resource, generation)
  }
}
