// Sandbox create + run `true`, p50 and p90, alternating between E2B's SDK
// through `airlock serve --e2b-listen` and the same through /v1 (plain
// fetch, the TypeScript SDK's calls): pooled (profile default, the warm
// pool) and with the E2B door's own request (image base + inline policy,
// served by the template's warm pool too). Before each round the pools are
// full again (the server's airlock_sandboxes gauge, not timed): each
// create is measured from a warm pool. v1same runs what E2B's SDK runs for
// commands.run('true'), `bash -l -c true` as the template's user: the
// door's own cost is e2b against v1same; against v1pool it includes the
// login shell's (bash; in templates built before scripts/e2b-login-profile.sh
// also /etc/profile's `id -u`). Run by bench/e2b.sh, which starts
// the server.
import http from 'node:http'
import { Sandbox } from '../../test/e2b/node_modules/e2b/dist/index.mjs'

const v1 = process.env.AIRLOCK_URL
const key = process.env.AIRLOCK_KEY
const n = Number(process.env.N || 20)
const hdr = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }

async function call(method, path, body) {
  const r = await fetch(v1 + path, { method, headers: hdr, body: body && JSON.stringify(body) })
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`)
  return r.status === 204 ? null : r.json()
}

// phases: create and run apart (p50 of each, to see where the time goes).
const phases = {}
function phase(way, create, run) {
  phases[way] ??= { create: [], run: [] }
  phases[way].create.push(create)
  phases[way].run.push(run)
}

const ways = {
  e2b: async () => {
    const t0 = performance.now()
    const sbx = await Sandbox.create('base')
    const t1 = performance.now()
    const r = await sbx.commands.run('true')
    const ms = performance.now() - t0
    phase('e2b', t1 - t0, performance.now() - t1)
    if (r.exitCode !== 0) throw new Error('true failed')
    const v = await call('GET', `/v1/sandboxes/sb-${sbx.sandboxId.slice(2)}`)
    if (!v.pooled) throw new Error(`E2B create ${sbx.sandboxId} not pooled`)
    await sbx.kill()
    return ms
  },
  v1pool: async () => {
    const t0 = performance.now()
    const sb = await call('POST', '/v1/sandboxes', { profile: 'default' })
    const t1 = performance.now()
    const r = await call('POST', `/v1/sandboxes/${sb.id}/exec`, { args: ['true'] })
    const ms = performance.now() - t0
    phase('v1pool', t1 - t0, performance.now() - t1)
    if (r.exit_code !== 0 || !sb.pooled) throw new Error(`true failed or not pooled: ${JSON.stringify(r)} ${sb.pooled}`)
    await call('DELETE', `/v1/sandboxes/${sb.id}`)
    return ms
  },
  // The command E2B's SDK sends for commands.run('true') (a login shell as
  // the template's user), through /v1 from the template's warm pool: the
  // same work as the e2b way, without the door.
  v1same: async () => {
    const t0 = performance.now()
    const sb = await call('POST', '/v1/sandboxes', { image: 'base', policy: { network: { mode: 'open' } } })
    const r = await call('POST', `/v1/sandboxes/${sb.id}/exec`, {
      args: ['/bin/bash', '-l', '-c', 'true'], user: 'user', dir: '/home/user',
      env: { E2B_SANDBOX: 'true', HOME: '/home/user', USER: 'user', LOGNAME: 'user' },
    })
    const ms = performance.now() - t0
    if (r.exit_code !== 0 || !sb.pooled) throw new Error(`bash -l failed or not pooled: ${JSON.stringify(r)} ${sb.pooled}`)
    await call('DELETE', `/v1/sandboxes/${sb.id}`)
    return ms
  },
  v1image: async () => {
    const t0 = performance.now()
    const sb = await call('POST', '/v1/sandboxes', { image: 'base', policy: { network: { mode: 'open' } } })
    const r = await call('POST', `/v1/sandboxes/${sb.id}/exec`, { args: ['true'] })
    const ms = performance.now() - t0
    if (r.exit_code !== 0 || !sb.pooled) throw new Error(`true failed or not pooled: ${JSON.stringify(r)} ${sb.pooled}`)
    await call('DELETE', `/v1/sandboxes/${sb.id}`)
    return ms
  },
}

// pooled: the pooled sandboxes the server holds (its /metrics, unix socket).
function pooled() {
  return new Promise((resolve, reject) => {
    http.get({ socketPath: process.env.AIRLOCK_SOCKET, path: '/metrics' }, (res) => {
      let body = ''
      res.on('data', (c) => (body += c))
      res.on('end', () => {
        let n = 0
        for (const m of body.matchAll(/^airlock_sandboxes\{[^}]*state="pooled"[^}]*\} (\d+)$/gm)) n += Number(m[1])
        resolve(n)
      })
    }).on('error', reject)
  })
}
const full = Number(process.env.POOLED || 0)
async function untilFull() {
  const end = Date.now() + 120_000
  while ((await pooled()) < full) {
    if (Date.now() > end) throw new Error(`pools not refilled to ${full} in 2 minutes`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

const times = Object.fromEntries(Object.keys(ways).map((k) => [k, []]))
for (const w of Object.keys(ways)) await ways[w]() // warm-up
for (let i = 0; i < n; i++) {
  await untilFull()
  for (const w of Object.keys(ways)) times[w].push(await ways[w]())
}
const q = (a, p) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * p))]
const out = {}
for (const [w, a] of Object.entries(times)) out[w] = { p50: +q(a, 0.5).toFixed(1), p90: +q(a, 0.9).toFixed(1) }
for (const [w, p] of Object.entries(phases)) {
  out[w].create_p50 = +q(p.create.slice(1), 0.5).toFixed(1) // warm-up left out
  out[w].run_p50 = +q(p.run.slice(1), 0.5).toFixed(1)
}
out.ratio_e2b_to_v1pool = +(out.e2b.p50 / out.v1pool.p50).toFixed(2)
out.ratio_e2b_to_v1image = +(out.e2b.p50 / out.v1image.p50).toFixed(2)
out.ratio_e2b_to_v1same = +(out.e2b.p50 / out.v1same.p50).toFixed(2)
console.log(JSON.stringify({ n, ...out }, null, 1))
