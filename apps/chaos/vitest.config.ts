import { defineConfig } from 'vitest/config'

// The CI run starts worker processes, a redis-server and faults: one file at a time, long
// timeouts (the machine has 2 cores, and the runs measure races, not throughput).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 360_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
})
