import type { QueueMode } from '../backend/backend.js'

/** Tickets kept (resources our locker waits for); past this it starts over. */
const KEPT = 1_024

/** Where a try stands in every node's queue (see queued-acquire.ts); '' for the server's clock. */
export interface TicketPair {
  readonly ticket: string
  readonly stayTicket: string
}

const NONE: TicketPair = Object.freeze({ ticket: '', stayTicket: '' })

/**
 * Quorum mode's places in the queues: a locker's ticket for a resource is the time it began to
 * wait for it (`Date.now()`, ms), the same on every node and on every try until it is granted, so
 * that the nodes' queues agree on who came first although the tries reach them in different
 * orders. After a grant with more of our waiters waiting (`stay`), the back of the line: the time
 * of that try. (On a single Redis the server's clock orders arrivals and no ticket is sent.)
 */
export class Tickets {
  readonly #tickets = new Map<string, number>()

  /** The tickets a try sent `now` carries. */
  forTry(resource: string, queue: QueueMode, now: number): TicketPair {
    if (queue === 'none') return NONE
    let mine = this.#tickets.get(resource)
    if (mine === undefined) {
      if (this.#tickets.size >= KEPT) this.#tickets.clear()
      mine = now
      this.#tickets.set(resource, mine)
    }
    return { ticket: String(mine), stayTicket: String(now) }
  }

  /** A try sent at `sentAt` won the lock: our place is spent, or (staying) at the back of the line. */
  granted(resource: string, queue: QueueMode, sentAt: number): void {
    if (queue === 'stay') this.#tickets.set(resource, sentAt)
    else this.#tickets.delete(resource)
  }

  /** Nobody here waits for the resource any more. */
  forget(resource: string): void {
    this.#tickets.delete(resource)
  }
}
