// Behaviours E2B's own SDK suite checks that Airlock's first tests did
// not: file owners by name, watch events of writes through files.write,
// the error of a command whose sandbox is killed under it, and a new boot
// id after a filesystem-only pause.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, FilesystemEventType, FileType, TimeoutError } from 'e2b'
import { template } from './helpers.mjs'

// events collects a watch's events; wait(pred) resolves with the first
// event (seen before or after the call) for which pred holds.
function collector() {
  const seen = []
  const waiters = []
  return {
    seen,
    on(ev) {
      seen.push(ev)
      for (const w of [...waiters]) {
        if (w.pred(ev)) {
          waiters.splice(waiters.indexOf(w), 1)
          w.resolve(ev)
        }
      }
    },
    wait(pred) {
      const found = seen.find(pred)
      if (found) return Promise.resolve(found)
      return new Promise((resolve) => waiters.push({ pred, resolve }))
    },
  }
}

test('file owners and groups by name, in getInfo and list', async () => {
  const sbx = await Sandbox.create('userbase')
  try {
    await sbx.files.write('owned.txt', 'x')
    const info = await sbx.files.getInfo('owned.txt')
    assert.equal(info.owner, 'user')
    assert.equal(info.group, 'user')
    const listed = await sbx.files.list('/home/user')
    const e = listed.find((x) => x.name === 'owned.txt')
    assert.equal(e.owner, 'user')
    assert.equal(e.group, 'user')
    const etc = await sbx.files.getInfo('/etc', { user: 'root' })
    assert.equal(etc.owner, 'root')
    assert.equal(etc.group, 'root')
    // An id with no name in the sandbox's /etc/passwd is shown as a number.
    await sbx.commands.run('touch /tmp/n && chown 4242:4343 /tmp/n', { user: 'root' })
    const n = await sbx.files.getInfo('/tmp/n')
    assert.equal(n.owner, '4242')
    assert.equal(n.group, '4343')
  } finally {
    await sbx.kill()
  }
})

test('watch: files.write is seen as a write of the file, flat and recursive', async () => {
  const sbx = await Sandbox.create('userbase')
  try {
    await sbx.files.makeDir('w/nested')
    await sbx.files.write('w/f.txt', 'one')
    const flat = collector()
    const h1 = await sbx.files.watchDir('w', (ev) => flat.on(ev), { includeEntry: true })
    const deep = collector()
    const h2 = await sbx.files.watchDir('w', (ev) => deep.on(ev), { recursive: true })
    await sbx.files.write('w/f.txt', 'two') // an existing file
    const ev = await flat.wait((e) => e.type === FilesystemEventType.WRITE && e.name === 'f.txt')
    assert.equal(ev.entry?.path, '/home/user/w/f.txt')
    assert.equal(ev.entry?.type, FileType.FILE)
    await sbx.files.write('w/nested/g.txt', 'new') // a new file, below
    await deep.wait((e) => e.type === FilesystemEventType.WRITE && e.name === 'nested/g.txt')
    await h1.stop()
    await h2.stop()
    // The upload's hidden sibling is Airlock's detail: never an event.
    for (const e of [...flat.seen, ...deep.seen]) assert.ok(!e.name.includes('.airlock-upload-'), e.name)
  } finally {
    await sbx.kill()
  }
})

test('a command whose sandbox is killed under it ends with TimeoutError', async () => {
  const sbx = await Sandbox.create('base')
  const cmd = await sbx.commands.run('sleep 600', { background: true })
  await sbx.kill()
  const err = await cmd.wait().catch((e) => e)
  assert.ok(err instanceof TimeoutError, `${err?.constructor?.name}: ${err?.message}`)
  assert.match(err.message, /sandbox was killed or reached its end of life/)
})

test('a filesystem-only pause reboots (a new boot id); a pause with memory does not', async () => {
  const sbx = await Sandbox.create(template)
  const bootID = async (s) => (await s.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim()
  try {
    const first = await bootID(sbx)
    assert.match(first, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    await sbx.files.write('/home/user/kept.txt', 'kept', { metadata: { kept: 'across the pause' } })
    await sbx.pause()
    const frozen = await sbx.connect()
    assert.equal(await bootID(frozen), first)
    await sbx.pause({ keepMemory: false })
    assert.equal(await sbx.isRunning(), false)
    const back = await sbx.connect()
    assert.equal(await back.files.read('/home/user/kept.txt'), 'kept')
    assert.deepEqual((await back.files.getInfo('/home/user/kept.txt')).metadata, { kept: 'across the pause' })
    const second = await bootID(back)
    assert.notEqual(second, first)
    assert.match(second, /^[0-9a-f-]{36}$/)
  } finally {
    await sbx.kill()
  }
})
