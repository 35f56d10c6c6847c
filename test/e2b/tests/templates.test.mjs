// E2B templates by name: base (scripts/e2b-templates.sh) and a Dockerfile
// template built on it with `airlock image build -t my-template`.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

test('base has E2B\'s user, its home and tools; root on request', async () => {
  const sbx = await Sandbox.create('base')
  try {
    const r = await sbx.commands.run('id -un; pwd; python3 -c "print(1+1)"; node -e "console.log(3)"; git --version; curl --version | head -1')
    const lines = r.stdout.split('\n')
    assert.deepEqual(lines.slice(0, 4), ['user', '/home/user', '2', '3'])
    assert.match(lines[4], /^git version/)
    assert.match(lines[5], /^curl /)
    const root = await sbx.commands.run('id -u', { user: 'root' })
    assert.equal(root.stdout, '0\n')
    await sbx.files.write('note.txt', 'hi')
    assert.equal((await sbx.commands.run('stat -c %U /home/user/note.txt')).stdout, 'user\n')
  } finally {
    await sbx.kill()
  }
})

test('a Dockerfile template is usable by name', async () => {
  const sbx = await Sandbox.create('my-template')
  try {
    const r = await sbx.commands.run('cat /etc/airlock-template-mark; id -un')
    assert.equal(r.stdout, 'from-dockerfile\nuser\n')
  } finally {
    await sbx.kill()
  }
})
