import react from '@vitejs/plugin-react'
import { defineConfig } from 'vitest/config'

// Two projects: the components in happy-dom, and the end-to-end test in Node driving a real
// Chromium against the real shop (one file, long timeouts).
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
        test: { name: 'e2e', environment: 'node', include: ['test/e2e/**/*.test.ts'], testTimeout: 180_000, hookTimeout: 120_000 },
      },
    ],
  },
})
