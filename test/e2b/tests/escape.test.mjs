// Escape subset through the E2B door: a keyed tenant with its own ceiling
// attacks the host through E2B's commands.run. e2b_test.go
// (TestE2BEscape) prepares the targets and shows every attack works
// unconfined first; here each must fail inside the sandbox.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'
import { template } from './helpers.mjs'

const env = process.env
let sbx
test.before(async () => {
  sbx = await Sandbox.create(template)
})
test.after(async () => {
  await sbx?.kill()
})

// run: exit code and output of cmd as root in the sandbox, never throwing.
async function run(cmd) {
  try {
    const r = await sbx.commands.run(cmd, { user: 'root', timeoutMs: 30_000 })
    return { code: r.exitCode, out: r.stdout + r.stderr }
  } catch (e) {
    return { code: e.exitCode ?? -1, out: String(e.stdout ?? '') + String(e.stderr ?? e.message) }
  }
}

test('read a host file', async () => {
  const r = await run(`cat ${env.ESC_SECRET_FILE}; cat /proc/1/root${env.ESC_SECRET_FILE}`)
  assert.ok(!r.out.includes(env.ESC_SECRET), `host secret read: ${r.out}`)
})

test('write outside the workspace onto the host', async () => {
  const r = await run(`echo pwned > ${env.ESC_WRITE_FILE}; echo pwned > /proc/1/root${env.ESC_WRITE_FILE}; true`)
  assert.equal(r.code, 0)
  // the host checks its file is unchanged (e2b_test.go) after this run
})

test('reach the host network and the metadata address', async () => {
  for (const url of [`http://${env.ESC_HOST_ADDR}/`, `http://127.0.0.1:${env.ESC_HOST_PORT}/`, 'http://169.254.169.254/latest/meta-data/']) {
    const r = await run(`curl -sf -m 5 ${url}`)
    assert.ok(!r.out.includes(env.ESC_SECRET), `${url} reached: ${r.out}`)
    assert.notEqual(r.code, 0, `${url}: curl succeeded: ${r.out}`)
  }
})

test('signal a host process', async () => {
  const r = await run(`kill -TERM ${env.ESC_VICTIM_PID}; kill -0 ${env.ESC_VICTIM_PID}`)
  assert.notEqual(r.code, 0, `host pid ${env.ESC_VICTIM_PID} reachable: ${r.out}`)
  // the host checks its process is alive (e2b_test.go)
})
