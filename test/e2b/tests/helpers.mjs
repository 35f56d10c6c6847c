// Helpers of Airlock's E2B tests: they run E2B's published SDKs, unmodified,
// against `airlock serve --e2b-listen` (started by test/e2b/e2b_test.go,
// which passes E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY).
import http from 'node:http'

export const template = process.env.AIRLOCK_E2B_TEMPLATE || 'base'

// hostGet sends GET path to the E2B listener with Host set to host (what
// DNS for PORT-ID.DOMAIN would reach) and resolves {status, body}.
export function hostGet(host, path = '/', headers = {}) {
  const u = new URL(process.env.E2B_API_URL)
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path, headers: { ...headers, host } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

export async function until(fn, ms = 15000) {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() > end) throw new Error('condition not met in time')
    await new Promise((r) => setTimeout(r, 100))
  }
}
