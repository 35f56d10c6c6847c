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

// pidGap runs cmd's login shell (E2B's `bash -l -c`, as opts.user) n times
// and returns the smallest gap between the shell's PID and that of the first
// process it starts after its start-up files: 1 when nothing forked before
// (PIDs are handed out in order in the sandbox's own PID namespace; a thread
// of the sandbox's agent can only widen a gap, hence the smallest of n).
async function pidGap(sbx, before, opts = {}) {
  let gap = Infinity
  for (let i = 0; i < 5; i++) {
    const r = await sbx.commands.run(`${before}echo $$ $(exec /bin/sh -c 'echo $$')`, opts)
    const [shell, child] = r.stdout.trim().split(' ').map(Number)
    assert.ok(child > shell, r.stdout)
    gap = Math.min(gap, child - shell)
  }
  return gap
}

test('base\'s login shell starts without a fork and keeps Debian\'s PATH rule', async () => {
  const sbx = await Sandbox.create('base')
  try {
    // The measure sees a fork: one id(1) before the child widens the gap.
    assert.ok(await pidGap(sbx, 'id -u >/dev/null; ') >= 2)
    assert.equal(await pidGap(sbx, ''), 1)
    assert.equal(await pidGap(sbx, '', { user: 'root' }), 1)
    // What /etc/profile decides by the effective uid is unchanged, for bash
    // and dash, whatever EUID the environment claims; its helpers are gone.
    const user = '/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games'
    const root = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    const show = 'echo "$PATH ${__airlock_euid-none}"'
    assert.equal((await sbx.commands.run(show)).stdout, `${user} none\n`)
    assert.equal((await sbx.commands.run(show, { user: 'root' })).stdout, `${root} none\n`)
    assert.equal((await sbx.commands.run(show, { envs: { EUID: '0' } })).stdout, `${user} none\n`)
    const dash = `/bin/sh -l -c '${show}'`
    assert.equal((await sbx.commands.run(dash, { envs: { EUID: '0' } })).stdout, `${user} none\n`)
    assert.equal((await sbx.commands.run(dash, { user: 'root' })).stdout, `${root} none\n`)
  } finally {
    await sbx.kill()
  }
})
