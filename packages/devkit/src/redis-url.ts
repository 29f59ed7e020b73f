/**
 * The Redis the tests and tools share (the machine's, or another): one environment variable,
 * `REDIS_URL`, default redis://127.0.0.1:6379, and one clear message when it does not answer.
 */

/** `REDIS_URL`, else the machine's Redis. */
export function sharedRedisUrl(): string {
  return process.env.REDIS_URL || 'redis://127.0.0.1:6379'
}

/**
 * Resolves when `client` answers PING within `ms`; else rejects with a message saying how to
 * start Redis (tests that need it fail, they never skip).
 */
export async function waitForRedis(client: { ping(): Promise<unknown> }, label: string, ms = 3_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      client.ping(),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`Redis at ${label} did not answer PING within ${ms} ms. Start it (npm test does when run as root: scripts/ensure-system.mjs), or set REDIS_URL; these tests never skip.`)),
          ms,
        )
        timer.unref()
      }),
    ])
  } finally {
    clearTimeout(timer)
  }
}
