/**
 * Quorum mode's lean acquire with the restart guard on (scripts/node-marker.ts) mints with two
 * hooks, both Lua:
 * - `onMissing` runs when `INCR` found no counter (it returned 1) — the only time a node that lost
 *   its data can be granting: a counter lives at least `fenceTtlMs` after every grant, so a node
 *   that still has it has not lost the resource's keys. It checks the node marker there, not on
 *   every grant;
 * - `touch` (an argument, '1' or '0'): whether this grant refreshes the counter's expiry. The
 *   backend sends '0' while a grant of its own refreshed it lately enough that it lives
 *   `fenceTtlMs` past this one anyway (backend/fence-touches.ts).
 */
export interface QuorumMint {
  readonly onMissing: string
  readonly touch: string
}

/**
 * The token of a grant, minted in the script that grants it (a Lua fragment that leaves the
 * token in the local `token`), shared by both acquire scripts.
 *
 * The counter is `INCR`ed: one call, no clock read, no formatting. Only when the counter is
 * missing (the resource's first grant, the counter expired, or it was lost with the data: a
 * restart without persistence, a FLUSHALL) is it seeded from the server clock in microseconds. A
 * seed lies above every token minted since the previous seed as long as fewer than one grant per
 * microsecond (on average) were made since then, which no single Redis comes near (~10^5 grants
 * per second at most), and the clock did not step back by more than the counter's idle lifetime.
 *
 * Every grant gives the counter a fresh expiry of `fenceTtlMs`: a counter lives `fenceTtlMs` from
 * the last grant (or raise, raise-fence.ts) that touched it, not from its seed. In quorum mode a
 * majority's counters carry what they know of the tokens handed out; an expiry counted from the
 * seed would drop that knowledge on a schedule, and a node whose clock runs ahead could then hand
 * out a token that the next, freshly seeded majority undercuts (docs/LOCK.md).
 *
 * A counter can also go back without going missing: a failover to a replica that had not yet
 * seen the latest grants. Then `INCR` alone would mint a token already handed out. So a try sent
 * with `reseed` mints `max(INCR, clock)`: the backend sends it on the first grant of a resource
 * after each (re)connection or change of topology, which every failover causes, and the new
 * primary's clock lies far above a counter that grows by one per grant.
 *
 * Lua numbers are doubles, and so are the client's: a token is returned as an integer only below
 * 2^52, and read back as a string (INCR works on exact 64-bit integers) from there on. Not 2^53:
 * ioredis's parser adds each digit to ten times the digits before, so its intermediate exceeds
 * the value, and integers just under 2^53 came back off by one in a test (2^53 - 1 as 2^53).
 * Tokens seeded from the clock are ~1.8e15; 2^52 is ~4.5e15 (the year 2112 in µs). The seed
 * itself is built from TIME's two strings.
 */
export const mintToken = (fenceKey: string, fenceTtlMs: string, reseed: string, quorum?: QuorumMint): string => `
local token = redis.call('INCR', ${fenceKey})
local seeded = false${quorum ? `\nif token == 1 then${quorum.onMissing}end` : ''}
if token == 1 or ${reseed} == '1' then
  local t = redis.call('TIME')
  local clock = t[1] .. string.format('%06d', tonumber(t[2]))
  if token == 1 or tonumber(clock) > token then
    token = clock
    seeded = true
    redis.call('SET', ${fenceKey}, token, 'PX', ${fenceTtlMs})
  end
end
if not seeded then
  ${quorum ? `if ${quorum.touch} == '1' then redis.call('PEXPIRE', ${fenceKey}, ${fenceTtlMs}) end` : `redis.call('PEXPIRE', ${fenceKey}, ${fenceTtlMs})`}
  if token >= 4503599627370496 then
    token = redis.call('GET', ${fenceKey})
  end
end`
