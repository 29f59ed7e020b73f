import type { LockResource, QueueMode } from '../backend/backend.js'

/**
 * Whether our locker may be in a resource's queue in Redis, so that it leaves when nobody here
 * waits any more (a locker left queued would be handed the lock and hold everyone up for
 * `handoffMs`). Membership is recorded when a joining try is *sent* — its outcome may stay
 * unknown — and cleared when a grant took us out or a leave was sent.
 */
export class QueueMembership {
  readonly #members = new Map<string, LockResource>()
  /** Leaves sent so far: tells a joining try whether a leave went out after it. */
  #leaves = 0
  readonly #sendLeave: (resource: LockResource) => Promise<unknown>

  /** @param sendLeave sends the leave script (its failure is ignored: the queue lease lapses). */
  constructor(sendLeave: (resource: LockResource) => Promise<unknown>) {
    this.#sendLeave = sendLeave
  }

  /** A try is being sent; returns what {@link replied} needs to know about it later. */
  sending(resource: LockResource, mode: QueueMode): number {
    if (mode !== 'none') this.#members.set(resource.name, resource)
    return this.#leaves
  }

  /** What a try's reply says about our place in the resource's queue. */
  replied(resource: LockResource, mode: QueueMode, leavesBefore: number, granted: boolean, handedOver: boolean): void {
    const { name } = resource
    if (granted) {
      // A hand-off popped us from the queue; a joining try that found the lock free left it;
      // `stay` kept our place.
      if (handedOver ? mode !== 'stay' : mode === 'join') this.#members.delete(name)
    } else if (mode !== 'none') {
      // The miss queued us. A leave sent after the try normally landed after it too; but a try
      // that fell back to EVAL (NOSCRIPT) lands after that leave and leaves us queued: leave again.
      if (this.#leaves === leavesBefore) this.#members.set(name, resource)
      else if (!this.#members.has(name)) this.#leave(resource)
    }
  }

  /** Nobody here waits for the resource: leave its queue (a no-op when we cannot be in it). */
  leave(resource: LockResource): void {
    if (this.#members.delete(resource.name)) this.#leave(resource)
  }

  /** Leaves every queue we may be in (closing); resolves when the leaves answered or failed. */
  leaveAll(): Promise<unknown> {
    const resources = [...this.#members.values()]
    this.#members.clear()
    return Promise.allSettled(resources.map((r) => this.#send(r)))
  }

  #leave(resource: LockResource): void {
    this.#send(resource).catch(() => {})
  }

  #send(resource: LockResource): Promise<unknown> {
    this.#leaves++
    return this.#sendLeave(resource)
  }
}
