import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two test files at a time (vitest's default on a 2-CPU machine is one): most of the suite's
    // time is waiting on leases, servers and paused processes. One after another the 40 files took
    // 352 s of a clean-clone npm test; two at a time, 232 s at load 13. The load-sensitive
    // quorum-load file still runs alone (package.json).
    maxWorkers: 2,
  },
})
