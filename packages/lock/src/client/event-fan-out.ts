import type { ClientEvents } from './redis-client.js'

/** Every event of {@link ClientEvents}, each told to all the engines listening. */
export type AllClientEvents = { readonly [E in keyof ClientEvents]-?: NonNullable<ClientEvents[E]> }

/**
 * One set of listeners on a client however many engines (Lockers) listen to it: `attach` puts
 * them on the client when the first engine listens, and takes them off (the function it returns)
 * when the last one stops; each event is told to every engine listening, in the order they began.
 * An EventEmitter warns past 10 listeners of one event (`MaxListenersExceededWarning`), and one
 * client shared by many Lockers is the usual set-up.
 */
export class ClientEventFanOut {
  readonly #attach: (all: AllClientEvents) => () => void
  /** One entry per listen(), in the order they began (one object listening twice: two listeners, as on an emitter). */
  readonly #listeners = new Set<{ readonly events: ClientEvents }>()
  #detach: (() => void) | undefined

  constructor(attach: (all: AllClientEvents) => () => void) {
    this.#attach = attach
  }

  listen(events: ClientEvents): () => void {
    const listener = { events }
    this.#listeners.add(listener)
    this.#detach ??= this.#attach(this.all)
    return () => {
      if (!this.#listeners.delete(listener) || this.#listeners.size > 0) return
      const detach = this.#detach
      this.#detach = undefined
      detach?.()
    }
  }

  /** Tells an event to every engine listening (what `attach` hears; an adapter may tell one it found out itself). */
  readonly all: AllClientEvents = {
    down: () => {
      for (const l of [...this.#listeners]) l.events.down?.()
    },
    ready: () => {
      for (const l of [...this.#listeners]) l.events.ready?.()
    },
    topology: () => {
      for (const l of [...this.#listeners]) l.events.topology?.()
    },
    error: (error) => {
      for (const l of [...this.#listeners]) l.events.error?.(error)
    },
    end: () => {
      for (const l of [...this.#listeners]) l.events.end?.()
    },
  }
}

/** The {@link ClientEventFanOut} of each client: the one `attach` makes for `client` the first time, the same after. */
export function fanOutPerClient<C extends object>(
  attach: (client: C, all: AllClientEvents) => () => void,
): (client: C) => ClientEventFanOut {
  const fanOuts = new WeakMap<C, ClientEventFanOut>()
  return (client) => {
    let fanOut = fanOuts.get(client)
    if (fanOut === undefined) {
      fanOut = new ClientEventFanOut((all) => attach(client, all))
      fanOuts.set(client, fanOut)
    }
    return fanOut
  }
}

/** A listener of an emitter's event. */
export type EmitterListener = (...args: unknown[]) => void

/** An emitter the adapters listen to (ioredis's, node-redis's clients). */
export interface ListenedEmitter {
  on(event: string, listener: EmitterListener): unknown
  off(event: string, listener: EmitterListener): unknown
}

/** Puts each `[event, listener]` on `emitter`; returns what takes them all off again. */
export function attachAll(
  emitter: ListenedEmitter,
  listeners: readonly (readonly [string, EmitterListener])[],
): () => void {
  for (const [event, listener] of listeners) emitter.on(event, listener)
  return () => {
    for (const [event, listener] of listeners) emitter.off(event, listener)
  }
}

/** A client closed for good: `down` first (what was in flight is lost), then `end`. */
export function downThenEnd(all: AllClientEvents): () => void {
  return () => {
    all.down()
    all.end()
  }
}
