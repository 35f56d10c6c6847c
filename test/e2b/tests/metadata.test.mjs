// File metadata through E2B's published SDK: X-Metadata-* headers on
// upload, kept as extended attributes user.e2b.KEY on the file, reported
// by getInfo, list and rename (issue 23).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, InvalidArgumentError } from 'e2b'
import { template } from './helpers.mjs'

// xattrs lists the extended attributes of p inside the sandbox, as root.
async function xattrs(sbx, p) {
  const r = await sbx.commands.run(`python3 -c 'import os,sys,json; print(json.dumps(sorted(os.listxattr(sys.argv[1]))))' ${p}`, { user: 'root' })
  return JSON.parse(r.stdout)
}

test('metadata: write, getInfo, list, rename, writeFiles, overwrite, out of band', async () => {
  const sbx = await Sandbox.create(template)
  try {
    const meta = { author: 'mish', purpose: 'upload' }
    const info = await sbx.files.write('/tmp/m/a.txt', 'x', { metadata: meta })
    assert.deepEqual(info.metadata, meta)
    assert.deepEqual((await sbx.files.getInfo('/tmp/m/a.txt')).metadata, meta)
    assert.deepEqual(await xattrs(sbx, '/tmp/m/a.txt'), ['user.e2b.author', 'user.e2b.purpose'])
    const oct = await sbx.files.write('/tmp/m/o.txt', 'x', { metadata: { k: 'octet' }, useOctetStream: true })
    assert.deepEqual(oct.metadata, { k: 'octet' })
    const listed = await sbx.files.list('/tmp/m')
    assert.deepEqual(listed.find((e) => e.name === 'o.txt').metadata, { k: 'octet' })
    const moved = await sbx.files.rename('/tmp/m/a.txt', '/tmp/m/b.txt')
    assert.deepEqual(moved.metadata, meta)
    const many = await sbx.files.writeFiles([{ path: '/tmp/m/1', data: '1' }, { path: '/tmp/m/2', data: '2' }], { metadata: { source: 'multi' } })
    for (const i of many) assert.deepEqual((await sbx.files.getInfo(i.path)).metadata, { source: 'multi' })
    // An overwrite without metadata leaves none of the file it replaced.
    const again = await sbx.files.write('/tmp/m/b.txt', 'y')
    assert.equal(again.metadata, undefined)
    assert.equal((await sbx.files.getInfo('/tmp/m/b.txt')).metadata, undefined)
    // Set by a program in the sandbox: shown.
    await sbx.commands.run(`python3 -c "import os; os.setxattr('/tmp/m/b.txt', 'user.e2b.tag', b'oob'); os.setxattr('/tmp/m/b.txt', 'user.other', b'x')"`)
    assert.deepEqual((await sbx.files.getInfo('/tmp/m/b.txt')).metadata, { tag: 'oob' })
    await assert.rejects(sbx.files.write('/tmp/m/bad', 'x', { metadata: { 'bad key': 'v' } }), InvalidArgumentError)
  } finally {
    await sbx.kill()
  }
})

// rawUpload posts body to p with headers, as root, past the SDK's own
// checks of metadata.
async function rawUpload(sbx, p, headers) {
  const url = await sbx.uploadUrl(p, { user: 'root' })
  return fetch(url, {
    method: 'POST',
    body: 'x',
    headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983', 'Content-Type': 'application/octet-stream', ...headers },
  })
}

test('metadata: bounded, checked, and only ever user.e2b.* attributes', async () => {
  const sbx = await Sandbox.create(template)
  try {
    for (const [what, headers] of [
      ['a control character', { 'X-Metadata-good': 'a\tb' }],
      ['too large', { 'X-Metadata-big': 'v'.repeat(4096) }],
      ['a key too long', { ['X-Metadata-' + 'k'.repeat(247)]: 'v' }],
      ['too many keys', Object.fromEntries(Array.from({ length: 129 }, (_, i) => [`X-Metadata-k${i}`, 'v']))],
    ]) {
      const res = await rawUpload(sbx, '/tmp/refused', headers)
      const body = await res.text()
      assert.equal(res.status, 400, `${what}: ${res.status} ${body}`)
      assert.match(body, /metadata/, what)
    }
    assert.equal(await sbx.files.exists('/tmp/refused'), false)
    // Names of other namespaces stay keys under user.e2b.: no
    // security.capability (file capabilities), trusted.* or system.* on
    // the file, whatever the headers say.
    const res = await rawUpload(sbx, '/tmp/victim', {
      'X-Metadata-security.capability': 'AQAAAgAgAAAAAAAAAAAAAAAAAAA=',
      'X-Metadata-trusted.x': 'v',
      'X-Metadata-system.posix_acl_access': 'v',
    })
    assert.equal(res.status, 200, await res.text())
    assert.deepEqual(await xattrs(sbx, '/tmp/victim'), ['user.e2b.security.capability', 'user.e2b.system.posix_acl_access', 'user.e2b.trusted.x'])
    const r = await sbx.commands.run(`python3 -c "import os; os.getxattr('/tmp/victim', 'security.capability')"`, { user: 'root' }).catch((e) => e)
    assert.match(r.stderr, /No data available/)
  } finally {
    await sbx.kill()
  }
})
