import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, NotFoundError, FileType } from 'e2b'
import { template, hostGet, until } from './helpers.mjs'

test('create, info, list by metadata, kill', async () => {
  const sbx = await Sandbox.create(template, { metadata: { suite: 'airlock', run: String(process.pid) }, timeoutMs: 120_000 })
  try {
    assert.match(sbx.sandboxId, /^[a-z0-9]+$/)
    assert.ok(await sbx.isRunning())
    const info = await sbx.getInfo()
    assert.equal(info.sandboxId, sbx.sandboxId)
    assert.equal(info.state, 'running')
    assert.equal(info.metadata.run, String(process.pid))
    assert.ok(info.endAt.getTime() > Date.now() + 60_000)
    const page = await Sandbox.list({ query: { metadata: { run: String(process.pid) } } }).nextItems()
    assert.deepEqual(page.map((s) => s.sandboxId), [sbx.sandboxId])
  } finally {
    assert.equal(await sbx.kill(), true)
  }
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  const after = await Sandbox.list({ query: { metadata: { run: String(process.pid) }, state: ['running'] } }).nextItems()
  assert.equal(after.length, 0)
})

test('commands: foreground, exit codes, env, cwd', async () => {
  const sbx = await Sandbox.create(template, { envs: { SBX_WIDE: 'wide' } })
  try {
    const r = await sbx.commands.run('echo "$SBX_WIDE $ONE"; echo err >&2; pwd', { envs: { ONE: '1' }, cwd: '/tmp' })
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'wide 1\n/tmp\n')
    assert.equal(r.stderr, 'err\n')
    await assert.rejects(sbx.commands.run('exit 3'), (e) => e instanceof CommandExitError && e.exitCode === 3)
    const chunks = []
    await sbx.commands.run('for i in 1 2 3; do echo $i; done', { onStdout: (d) => chunks.push(d) })
    assert.equal(chunks.join(''), '1\n2\n3\n')
  } finally {
    await sbx.kill()
  }
})

test('commands: background, list, connect, kill, stdin', async () => {
  const sbx = await Sandbox.create(template)
  try {
    const bg = await sbx.commands.run('sleep 600', { background: true })
    assert.ok(bg.pid > 0)
    const listed = await sbx.commands.list()
    assert.ok(listed.some((p) => p.pid === bg.pid && p.args.join(' ').includes('sleep 600')))
    const alive = await sbx.commands.run(`kill -0 ${bg.pid} && echo alive`)
    assert.equal(alive.stdout, 'alive\n')

    const counter = await sbx.commands.run('for i in 1 2 3 4 5 6 7 8 9 10; do echo tick; sleep 0.3; done', { background: true })
    const again = await sbx.commands.connect(counter.pid)
    const res = await again.wait()
    assert.equal(res.exitCode, 0)
    assert.ok(res.stdout.includes('tick'))

    assert.equal(await sbx.commands.kill(bg.pid), true)
    await assert.rejects(sbx.commands.run(`kill -0 ${bg.pid}`), CommandExitError)
    assert.equal(await sbx.commands.kill(bg.pid), false)
    await assert.rejects(sbx.commands.connect(999999), NotFoundError)

    const cat = await sbx.commands.run('cat', { background: true, stdin: true })
    await sbx.commands.sendStdin(cat.pid, 'hello ')
    await sbx.commands.sendStdin(cat.pid, 'stdin\n')
    await sbx.commands.closeStdin(cat.pid)
    const out = await cat.wait()
    assert.equal(out.stdout, 'hello stdin\n')
  } finally {
    await sbx.kill()
  }
})

test('pty: create, input, resize, reconnect, kill', async () => {
  const sbx = await Sandbox.create(template)
  try {
    let out = ''
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (out += new TextDecoder().decode(d)) })
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size; echo mark-$((6*7))\n'))
    await until(() => out.includes('mark-42'))
    assert.ok(out.includes('24 80'))
    await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
    await term.disconnect()
    let out2 = ''
    const back = await sbx.pty.connect(term.pid, { onData: (d) => (out2 += new TextDecoder().decode(d)) })
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size\n'))
    await until(() => out2.includes('30 100'))
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('exit 0\n'))
    const r = await back.wait()
    assert.equal(r.exitCode, 0)
    const t2 = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} })
    assert.equal(await sbx.pty.kill(t2.pid), true)
    assert.equal(await sbx.pty.kill(t2.pid), false)
  } finally {
    await sbx.kill()
  }
})

test('files: write, read, list, stat, exists, rename, remove, makeDir, watch, URLs', async () => {
  const sbx = await Sandbox.create(template)
  try {
    const info = await sbx.files.write('/tmp/e2b/a.txt', 'hello')
    assert.equal(info.path, '/tmp/e2b/a.txt')
    assert.equal(await sbx.files.read('/tmp/e2b/a.txt'), 'hello')
    assert.deepEqual(Buffer.from(await sbx.files.read('/tmp/e2b/a.txt', { format: 'bytes' })).toString(), 'hello')
    await sbx.files.write([{ path: '/tmp/e2b/d/b.txt', data: 'b' }, { path: '/tmp/e2b/c.txt', data: new Blob(['c']) }])
    const listed = await sbx.files.list('/tmp/e2b', { depth: 2 })
    assert.deepEqual(listed.map((e) => e.path), ['/tmp/e2b/a.txt', '/tmp/e2b/c.txt', '/tmp/e2b/d', '/tmp/e2b/d/b.txt'])
    assert.equal(listed[2].type, FileType.DIR)
    const st = await sbx.files.getInfo('/tmp/e2b/a.txt')
    assert.equal(st.size, 5)
    assert.equal(st.type, FileType.FILE)
    assert.ok(await sbx.files.exists('/tmp/e2b/c.txt'))
    assert.equal(await sbx.files.exists('/tmp/e2b/none'), false)
    const moved = await sbx.files.rename('/tmp/e2b/c.txt', '/tmp/e2b/new/c2.txt')
    assert.equal(moved.path, '/tmp/e2b/new/c2.txt')
    assert.equal(await sbx.files.makeDir('/tmp/e2b/m/n'), true)
    assert.equal(await sbx.files.makeDir('/tmp/e2b/m/n'), false)
    await sbx.files.remove('/tmp/e2b/new')
    assert.equal(await sbx.files.exists('/tmp/e2b/new/c2.txt'), false)
    await assert.rejects(sbx.files.read('/tmp/e2b/none'), NotFoundError)

    const events = []
    const w = await sbx.files.watchDir('/tmp/e2b', (ev) => events.push(ev), { recursive: true })
    await sbx.files.write('/tmp/e2b/watched.txt', 'x')
    await until(() => events.some((e) => e.name === 'watched.txt'))
    await w.stop()

    const url = await sbx.downloadUrl('/tmp/e2b/a.txt')
    const res = await fetch(url, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } })
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'hello')
  } finally {
    await sbx.kill()
  }
})

test('timeouts: setTimeout shortens, the sandbox ends at its lease', async () => {
  const sbx = await Sandbox.create(template, { timeoutMs: 300_000 })
  await sbx.setTimeout(3_000)
  const info = await sbx.getInfo()
  assert.ok(info.endAt.getTime() < Date.now() + 10_000)
  await until(async () => !(await sbx.isRunning()), 30_000)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
})

test('commands: a command timeout ends it', async () => {
  const sbx = await Sandbox.create(template)
  try {
    await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1500 }), (e) => /timeout|timed out|deadline/i.test(String(e)))
  } finally {
    await sbx.kill()
  }
})

test('pause and resume keep processes and files', async () => {
  const sbx = await Sandbox.create(template)
  try {
    await sbx.files.write('/tmp/kept.txt', 'kept')
    const bg = await sbx.commands.run('sleep 600', { background: true })
    await sbx.pause()
    assert.equal(await sbx.isRunning(), false)
    assert.equal((await sbx.getInfo()).state, 'paused')
    const back = await Sandbox.connect(sbx.sandboxId)
    assert.ok(await back.isRunning())
    assert.equal(await back.files.read('/tmp/kept.txt'), 'kept')
    assert.ok((await back.commands.list()).some((p) => p.pid === bg.pid))
  } finally {
    await sbx.kill()
  }
})

test('a port reached through getHost', async () => {
  const sbx = await Sandbox.create(template)
  try {
    await sbx.files.write('/tmp/www/index.html', 'served by the sandbox')
    await sbx.commands.run('cd /tmp/www && python3 -m http.server 8000', { background: true })
    const host = sbx.getHost(8000)
    assert.match(host, new RegExp(`^8000-${sbx.sandboxId}\\.`))
    const res = await until(async () => {
      const r = await hostGet(host, '/index.html')
      return r.status === 200 ? r : null
    })
    assert.equal(res.body, 'served by the sandbox')
  } finally {
    await sbx.kill()
  }
  const gone = await hostGet(sbx.getHost(8000), '/')
  assert.equal(gone.status, 502)
})

// A private sandbox's ports answer only with its traffic token (the door
// gets it, with the envd token, in the /v1 create's answer).
test('a private sandbox: its port needs the traffic access token', async () => {
  const sbx = await Sandbox.create(template, { network: { allowPublicTraffic: false } })
  try {
    assert.ok(sbx.trafficAccessToken, 'no trafficAccessToken for a private sandbox')
    await sbx.files.write('/tmp/www/index.html', 'private page')
    await sbx.commands.run('cd /tmp/www && python3 -m http.server 8000', { background: true })
    const host = sbx.getHost(8000)
    const res = await until(async () => {
      const r = await hostGet(host, '/index.html', { 'e2b-traffic-access-token': sbx.trafficAccessToken })
      return r.status === 200 ? r : null
    })
    assert.equal(res.body, 'private page')
    assert.equal((await hostGet(host, '/index.html')).status, 403)
    assert.equal((await hostGet(host, '/index.html', { 'e2b-traffic-access-token': sbx.trafficAccessToken + 'x' })).status, 403)
  } finally {
    await sbx.kill()
  }
})

test('a template naming its envd user: calls run as user in /home/user, root on request', async () => {
  const sbx = await Sandbox.create('userbase')
  try {
    const r = await sbx.commands.run('id -un; pwd; echo $HOME')
    assert.equal(r.stdout, 'user\n/home/user\n/home/user\n')
    assert.equal((await sbx.commands.run('id -un', { user: 'root' })).stdout, 'root\n')
    const w = await sbx.files.write('owned.txt', 'x')
    assert.equal(w.path, '/home/user/owned.txt')
  } finally {
    await sbx.kill()
  }
})
