/**
 * A wall clock that runs ahead (or behind) for one spawned process: a tiny `LD_PRELOAD` library
 * that offsets `CLOCK_REALTIME` (`clock_gettime`, `gettimeofday`, `time`) by a fixed number of
 * milliseconds, read from `FENCELOCK_CLOCK_OFFSET_MS` in the process's environment.
 *
 * libfaketime would do it, but crashes Debian's redis-server (its jemalloc calls back into the
 * clock while libfaketime allocates). This shim allocates nothing and resolves nothing: it asks
 * the kernel by raw syscall and adds the offset. Monotonic clocks are left alone, so a server's
 * TTLs and timeouts still run at the right rate; only what it reads as "now" (`TIME`, the clock
 * seed of a token counter, expiry instants) is shifted.
 *
 * The library is compiled from the source below with the machine's `gcc` on first use, once per
 * source version, into the temp directory.
 */
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CannotStartError } from './cli.js'

/** The environment variable the shim reads its offset from (ms, may be negative). */
export const CLOCK_OFFSET_ENV = 'FENCELOCK_CLOCK_OFFSET_MS'

const SOURCE = `
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_ns(void) {
  static int known = 0;
  static long long ns = 0;
  if (!known) {
    const char *v = getenv("${CLOCK_OFFSET_ENV}");
    long long ms = 0;
    int negative = 0;
    if (v && *v == '-') { negative = 1; v++; }
    while (v && *v >= '0' && *v <= '9') { ms = ms * 10 + (*v - '0'); v++; }
    ns = (negative ? -ms : ms) * 1000000LL;
    known = 1;
  }
  return ns;
}

static void shift(struct timespec *ts) {
  long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_ns();
  ts->tv_sec = t / 1000000000LL;
  ts->tv_nsec = t % 1000000000LL;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
  int r = (int)syscall(SYS_clock_gettime, clk, ts);
  if (r == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) shift(ts);
  return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
  (void)tz;
  struct timespec ts;
  int r = (int)syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
  if (r != 0) return r;
  shift(&ts);
  if (tv) { tv->tv_sec = ts.tv_sec; tv->tv_usec = ts.tv_nsec / 1000; }
  return 0;
}

time_t time(time_t *out) {
  struct timespec ts;
  syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
  shift(&ts);
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
`

let built: string | undefined

/**
 * The path of the compiled shim (built on first use).
 * @throws CannotStartError when `gcc` cannot build it.
 */
export function clockShimLibrary(): string {
  if (built !== undefined) return built
  const hash = createHash('sha1').update(SOURCE).digest('hex').slice(0, 12)
  const dir = join(tmpdir(), 'fencelock-clock-shim')
  const library = join(dir, `clock-shim-${hash}.so`)
  if (!existsSync(library)) {
    mkdirSync(dir, { recursive: true })
    const source = join(dir, `clock-shim-${hash}-${process.pid}.c`)
    const partial = `${library}.${process.pid}`
    writeFileSync(source, SOURCE)
    try {
      execFileSync('gcc', ['-shared', '-fPIC', '-O2', '-o', partial, source], { stdio: 'pipe' })
    } catch (error) {
      throw new CannotStartError(`gcc could not build the clock shim (install Debian's gcc): ${(error as Error).message}`, { cause: error })
    }
    // Several test processes may build it at once: each renames a whole file into place.
    renameSync(partial, library)
  }
  built = library
  return library
}

/** The environment that runs a process with its wall clock `offsetMs` ahead (negative: behind). */
export function clockOffsetEnv(offsetMs: number): Record<string, string> {
  if (!Number.isInteger(offsetMs)) throw new TypeError(`clock offset must be an integer number of ms, got ${offsetMs}`)
  return { LD_PRELOAD: clockShimLibrary(), [CLOCK_OFFSET_ENV]: String(offsetMs) }
}
