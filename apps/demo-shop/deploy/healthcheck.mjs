// The shop container's healthcheck (docker-compose.yml): healthy when every instance answers
// GET /healthz and, when the dashboard is served, its page answers too. Reads the same
// environment as the shop (SHOP_INSTANCES, SHOP_BASE_PORT, SHOP_DASHBOARD_PORT), so it follows the
// compose file. Plain JavaScript on Node's fetch: the image has no curl. Exit 0 healthy, 1 not.
const int = (name, fallback) => (process.env[name] ? Number(process.env[name]) : fallback)
const instances = int('SHOP_INSTANCES', 4)
const basePort = int('SHOP_BASE_PORT', 3001)
const dashboardPort = int('SHOP_DASHBOARD_PORT', 0)
const urls = Array.from({ length: instances }, (_, i) => `http://127.0.0.1:${basePort + i}/healthz`)
if (dashboardPort > 0) urls.push(`http://127.0.0.1:${dashboardPort}/`)

const answers = await Promise.all(
  urls.map((url) =>
    fetch(url, { signal: AbortSignal.timeout(1_500) }).then(
      (res) => (res.ok ? undefined : `${url}: HTTP ${res.status}`),
      (error) => `${url}: ${error instanceof Error ? error.message : String(error)}`,
    ),
  ),
)
const failures = answers.filter((a) => a !== undefined)
if (failures.length > 0) console.error(`unhealthy: ${failures.join('; ')}`)
process.exit(failures.length > 0 ? 1 : 0)
