// Warm pools of a template through the E2B door (issue 23). e2b_test.go
// (TestE2BPool) serves with --pool-template, shows the host listener
// reachable from the host, and afterwards checks in the server's log that
// every sandbox made here came from the pool (their IDs: POOL_IDS_FILE).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { appendFileSync } from 'node:fs'
import { Sandbox } from 'e2b'
import { template } from './helpers.mjs'

const env = process.env
const hostIP = env.POOL_HOST_ADDR.split(':')[0]
const url = `http://${env.POOL_HOST_ADDR}/`

// fetchCmd: a command printing url's body (python3: the test image has no
// curl), through the sandbox's proxy variables or, with direct, not.
const fetchCmd = (direct) =>
  `python3 -c 'import sys, urllib.request as u; o = u.build_opener(${direct ? 'u.ProxyHandler({})' : ''}); print(o.open(sys.argv[1], timeout=10).read().decode())' ${url}`

async function create(opts) {
  const sbx = await Sandbox.create(template, opts)
  appendFileSync(env.POOL_IDS_FILE, sbx.sandboxId + '\n')
  return sbx
}

// run: exit code and output of cmd as root, never throwing.
async function run(sbx, cmd) {
  try {
    const r = await sbx.commands.run(cmd, { user: 'root', timeoutMs: 30_000 })
    return { code: r.exitCode, out: r.stdout + r.stderr }
  } catch (e) {
    return { code: e.exitCode ?? -1, out: String(e.stdout ?? '') + String(e.stderr ?? e.message) }
  }
}

test('a pooled sandbox carries exactly its network: the host listener allowed, then deny-all', async () => {
  const allowed = await create({ network: { denyOut: ['0.0.0.0/0'], allowOut: [hostIP] } })
  try {
    const r = await run(allowed, fetchCmd(false))
    assert.equal(r.code, 0, `allowed sandbox could not reach ${url}: ${r.out}`)
    assert.ok(r.out.includes(env.POOL_SECRET), `allowed sandbox got: ${r.out}`)
  } finally {
    await allowed.kill()
  }
  const denied = await create({ network: { denyOut: ['0.0.0.0/0'] } })
  try {
    for (const cmd of [fetchCmd(false), fetchCmd(true)]) {
      const r = await run(denied, cmd)
      assert.notEqual(r.code, 0, `deny-all sandbox reached ${url} (${cmd}): ${r.out}`)
      assert.ok(!r.out.includes(env.POOL_SECRET), `deny-all sandbox got the secret: ${r.out}`)
    }
  } finally {
    await denied.kill()
  }
})

test("a pooled sandbox holds nothing of a previous user's", async () => {
  const first = await create({ envs: { WHO: 'first' } })
  const made = await run(first, 'echo first-secret > /tmp/left; echo first-secret > /root/left; mkdir -p /home/user && echo first-secret > /home/user/left; (sleep 600 &) ; echo $WHO')
  assert.equal(made.code, 0, made.out)
  assert.equal(made.out.trim(), 'first')
  await first.kill()
  const second = await create()
  try {
    assert.notEqual(second.sandboxId, first.sandboxId)
    const r = await run(second, 'cat /tmp/left /root/left /home/user/left 2>&1; ps -eo args | grep -c "^sleep 600" ; echo "who=$WHO"')
    assert.ok(!r.out.includes('first-secret'), `second sandbox holds the first one's files: ${r.out}`)
    assert.ok(r.out.includes('who=\n') || r.out.trimEnd().endsWith('who='), `second sandbox has the first one's env: ${r.out}`)
    assert.match(r.out, /^0$/m, `second sandbox runs the first one's process: ${r.out}`)
  } finally {
    await second.kill()
  }
})
