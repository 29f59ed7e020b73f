/**
 * Which chaos a form offers. `redis-restart` restarts a redis-server the demo started itself; with
 * `REDIS_URL` set there is none, and the server refuses such a run (422). So the forms offer it
 * only when the server's limits say it can run, and say why when they do not — an option shown
 * and then refused was a trap.
 */
import type { RunLimits, WireChaos } from './wire'

/** Why Restart Redis is not offered, in one sentence for the forms. */
export const REDIS_RESTART_UNAVAILABLE =
  'Restart Redis is not offered: REDIS_URL is set, and the demo restarts only a Redis it started itself.'

/** `all` without the chaos this server cannot run (everything until its limits are known but `redis-restart`). */
export function offeredChaos(all: readonly WireChaos[], limits: RunLimits | null): WireChaos[] {
  return all.filter((c) => c !== 'redis-restart' || limits?.redisRestart === true)
}

/** The chaos to send: the one chosen while it is offered, else the first offered. */
export function chaosToSend(chosen: WireChaos, offered: readonly WireChaos[]): WireChaos {
  return offered.includes(chosen) ? chosen : (offered[0] ?? 'none')
}
