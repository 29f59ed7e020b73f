import { defineConfig } from 'vitest/config'

// The multi-process tests start instances, a load run and chaos: long timeouts, one file at a
// time (the machine has 2 cores and the runs measure races, not throughput).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
})
