/**
 * The lock scripts as plain round trips, for tests that drive them without a Locker (the
 * backend sends the same with its deadlines, its clean-up and its reseed rules).
 */
import type { ReleaseOutcome } from '../../src/backend/backend.js'
import { handoffReleaseScript, toReleaseOutcome } from '../../src/fair-queue/hand-on.js'
import { acquireScript, toAcquireReply, type AcquireReply } from '../../src/scripts/acquire.js'
import type { ScriptClient } from '../../src/scripts/define-script.js'
import { extendScript, isExtended } from '../../src/scripts/extend.js'
import { MARKED, releaseScript } from '../../src/scripts/release.js'

/** One single try: the lean acquire script. */
export function acquireOnce(
  client: ScriptClient,
  keys: { readonly lock: string; readonly fence: string },
  args: {
    readonly ownerId: string
    readonly ttlMs: number
    readonly fenceTtlMs: number
    readonly lockerId: string
    readonly reseed?: '0' | '1'
  },
): Promise<AcquireReply> {
  return acquireScript.run(client, keys, { ...args, reseed: args.reseed ?? '0' }, { map: toAcquireReply })
}

/** The owner-checked extend. */
export function extendOnce(
  client: ScriptClient,
  keys: { readonly lock: string },
  ownerId: string,
  ttlMs: number,
): Promise<boolean> {
  return extendScript.run(client, keys, { ownerId, ttlMs }, { map: isExtended })
}

/** The release: the lean script, then the hand-off when the key was marked. */
export function releaseOnce(
  client: ScriptClient,
  keys: { readonly lock: string; readonly queue: string; readonly leases: string; readonly channel: string },
  ownerId: string,
  lockerId: string,
  handoffMs: number,
): Promise<ReleaseOutcome> {
  return releaseScript.run(
    client,
    keys,
    { ownerId },
    {
      map: (reply: unknown) =>
        reply === MARKED
          ? handoffReleaseScript.run(
              client,
              keys,
              { ownerId, channel: keys.channel, lockerId, handoffMs },
              { map: toReleaseOutcome },
            )
          : reply === 1
            ? { freed: true, handedTo: undefined }
            : { freed: false },
    },
  )
}
