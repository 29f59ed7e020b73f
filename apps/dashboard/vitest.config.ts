import react from '@vitejs/plugin-react'
import { defineConfig } from 'vitest/config'

// Two projects: the components in happy-dom, and the end-to-end tests in Node driving a real
// Chromium (against the real shop, and against the dashboard's server with scripted runs for
// the layout), long timeouts.
export default defineConfig({
  plugins: [react()],
  test: {
    projects: [
      {
        extends: true,
        test: { name: 'components', environment: 'happy-dom', include: ['test/components/**/*.test.tsx', 'test/*.test.ts'] },
      },
      {
        extends: true,
        // One file at a time: each builds the dashboard and drives a Chromium, one also the whole demo.
        test: { name: 'e2e', environment: 'node', include: ['test/e2e/**/*.test.ts'], testTimeout: 180_000, hookTimeout: 120_000, fileParallelism: false },
      },
    ],
  },
})
