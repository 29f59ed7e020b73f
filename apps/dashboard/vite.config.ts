import react from '@vitejs/plugin-react'
import { defineConfig } from 'vite'
import { initialJsBudget } from './initial-js-budget.ts'

// `npm run demo` serves dist/ from the shop's process; in development, `vite` proxies the API to
// a running demo (DASHBOARD_API, default http://127.0.0.1:3000).
const api = process.env.DASHBOARD_API ?? 'http://127.0.0.1:3000'

export default defineConfig({
  plugins: [react(), initialJsBudget()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: false,
    target: 'es2022',
  },
  server: {
    proxy: {
      '/api': {
        target: api,
        // The demo answers only a Host that names it (DNS rebinding): the proxy sends the demo's
        // own, and the dev page's own requests (Origin = the dev server's Host) the demo's origin,
        // so they pass its same-origin check. Vite checks the dev server's Host itself.
        changeOrigin: true,
        configure: (proxy) => {
          proxy.on('proxyReq', (proxyReq, req) => {
            const origin = req.headers.origin
            if (origin !== undefined && URL.canParse(origin) && new URL(origin).host === req.headers.host) {
              proxyReq.setHeader('origin', new URL(api).origin)
            }
          })
        },
      },
    },
  },
})
