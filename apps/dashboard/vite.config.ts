import react from '@vitejs/plugin-react'
import { defineConfig } from 'vite'
import { initialJsBudget } from './initial-js-budget.ts'

// `npm run demo` serves dist/ from the shop's process; in development, `vite` proxies the API to
// a running demo (DASHBOARD_API, default http://127.0.0.1:3000).
export default defineConfig({
  plugins: [react(), initialJsBudget()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    target: 'es2022',
  },
  server: {
    proxy: { '/api': { target: process.env.DASHBOARD_API ?? 'http://127.0.0.1:3000', changeOrigin: false } },
  },
})
