import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The scratch project (npm install of the tarballs and their peers, prisma generate), made
    // once for every test file.
    globalSetup: ['test/global-setup.ts'],
    hookTimeout: 300_000,
    testTimeout: 120_000,
    // The docs' blocks run side by side (describe.concurrent), each with services of its own.
    maxConcurrency: 3,
  },
})
