import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // npm install of the tarballs and their peers, and prisma generate, in the scratch project.
    hookTimeout: 300_000,
    testTimeout: 120_000,
  },
})
