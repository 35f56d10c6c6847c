// Fork and snapshots through E2B's published SDK (issue 23 item 6).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, SandboxError, SandboxNotFoundError } from 'e2b'
import { template } from './helpers.mjs'

test('fork: every copy sees the files, changes are independent', async () => {
  const sbx = await Sandbox.create(template, { metadata: { suite: 'fork' } })
  const made = [sbx]
  try {
    await sbx.files.write('/home/user/notes.txt', 'from the source\n')
    await sbx.files.write('/home/user/meta.txt', 'm', { metadata: { kept: 'by fork' } })
    await sbx.commands.run('mkdir -p /home/user/d && head -c 65536 /dev/urandom > /home/user/d/blob && sha256sum /home/user/d/blob > /home/user/sum')
    const sum = await sbx.files.read('/home/user/sum')
    const forks = await sbx.fork({ count: 2 })
    assert.equal(forks.length, 2)
    for (const f of forks) {
      assert.ok(f instanceof Sandbox, String(f))
      made.push(f)
      assert.notEqual(f.sandboxId, sbx.sandboxId)
      assert.equal(await f.files.read('/home/user/notes.txt'), 'from the source\n')
      const check = await f.commands.run('sha256sum /home/user/d/blob')
      assert.equal(check.stdout, sum)
      assert.equal((await f.getInfo()).metadata.suite, 'fork')
      assert.deepEqual((await f.files.getInfo('/home/user/meta.txt')).metadata, { kept: 'by fork' })
    }
    await forks[0].files.write('/home/user/notes.txt', 'fork 0\n')
    await sbx.files.write('/home/user/only-source', 'x')
    assert.equal(await forks[1].files.read('/home/user/notes.txt'), 'from the source\n')
    assert.equal(await sbx.files.read('/home/user/notes.txt'), 'from the source\n')
    assert.equal(await forks[0].files.read('/home/user/notes.txt'), 'fork 0\n')
    assert.equal(await forks[0].files.exists('/home/user/only-source'), false)
  } finally {
    for (const s of made) await s.kill()
  }
  await assert.rejects(Sandbox.fork(sbx.sandboxId, { count: 1 }), SandboxNotFoundError)
})

test('snapshot: create from it after the sandbox is gone, list, delete', async () => {
  const sbx = await Sandbox.create(template)
  let snap
  try {
    await sbx.files.write('/home/user/kept.txt', 'kept\n')
    snap = await sbx.createSnapshot({ name: `fork-test-${process.pid}` })
    assert.ok(snap.snapshotId)
    assert.deepEqual(snap.names, [`fork-test-${process.pid}`])
    const mine = await sbx.listSnapshots().nextItems()
    assert.deepEqual(mine.map((s) => s.snapshotId), [snap.snapshotId])
  } finally {
    await sbx.kill()
  }
  const all = await Sandbox.listSnapshots().nextItems()
  assert.ok(all.some((s) => s.snapshotId === snap.snapshotId))
  for (const ref of [snap.snapshotId, snap.names[0]]) {
    const again = await Sandbox.create(ref, { metadata: { from: 'snapshot' } })
    try {
      assert.equal(await again.files.read('/home/user/kept.txt'), 'kept\n')
      assert.equal((await again.getInfo()).metadata.from, 'snapshot')
      const r = await again.commands.run('echo ok')
      assert.equal(r.stdout, 'ok\n')
    } finally {
      await again.kill()
    }
  }
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
  // The SDK maps no create error to NotFoundError: E2B answers 404 for an
  // unknown template or snapshot, which it raises as a SandboxError.
  await assert.rejects(Sandbox.create(snap.snapshotId), (e) => e instanceof SandboxError && /^404: /.test(e.message))
  await assert.rejects(Sandbox.createSnapshot('sb0000000000000000'), SandboxNotFoundError)
})
