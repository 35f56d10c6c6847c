// The code interpreter through the E2B door, driven by E2B's own
// @e2b/code-interpreter SDK (unmodified) on the code-interpreter-v1
// template (its default).
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

let sbx
before(async () => {
  sbx = await Sandbox.create({ timeoutMs: 600_000 })
})
after(async () => {
  await sbx?.kill()
})

test('runCode keeps state across calls, streams stdout and counts executions', async () => {
  const seen = []
  const a = await sbx.runCode('x = 40\nprint("hello", flush=True)\nx + 1', { onStdout: (m) => seen.push(m.line) })
  assert.equal(a.error, undefined)
  assert.equal(a.text, '41')
  // Output is streamed per write: print's text and its newline may come
  // as one message or two, depending on when the kernel's reader runs.
  assert.equal(a.logs.stdout.join(''), 'hello\n')
  assert.equal(seen.join(''), 'hello\n')
  const b = await sbx.runCode('x + 2')
  assert.equal(b.text, '42')
  assert.ok(b.executionCount > a.executionCount, `${b.executionCount} after ${a.executionCount}`)
  const c = await sbx.runCode('import sys; print("oops", file=sys.stderr)')
  assert.equal(c.logs.stderr.join(''), 'oops\n')
})

test('a matplotlib figure is a PNG result with its chart', async () => {
  const e = await sbx.runCode(`
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [2, 4, 8], label="growth")
ax.set_title("doubling")
plt.show()
`)
  assert.equal(e.error, undefined)
  const fig = e.results.find((r) => r.png)
  assert.ok(fig, `no png in ${JSON.stringify(e.results.map((r) => r.formats()))}`)
  const png = Buffer.from(fig.png, 'base64')
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  assert.equal(fig.chart.type, 'line')
  assert.equal(fig.chart.title, 'doubling')
  assert.deepEqual(fig.chart.elements[0].points, [[1, 2], [2, 4], [3, 8]])
})

test('a pandas DataFrame result carries html', async () => {
  const e = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2]})')
  assert.equal(e.error, undefined)
  assert.match(e.results[0].html, /<table/)
  assert.match(e.text, /a/)
})

test('an exception is an error with name, value and traceback', async () => {
  const e = await sbx.runCode('def f():\n    raise ValueError("bad input")\nf()')
  assert.equal(e.error.name, 'ValueError')
  assert.equal(e.error.value, 'bad input')
  assert.match(e.error.traceback, /line 2, in f/)
  assert.equal((await sbx.runCode('x')).text, '40')
})

test('a context has its own state and working directory', async () => {
  await sbx.files.makeDir('/home/user/work')
  const ctx = await sbx.createCodeContext({ cwd: '/home/user/work', language: 'python' })
  assert.equal(ctx.cwd, '/home/user/work')
  const e = await sbx.runCode('import os; os.getcwd()', { context: ctx })
  assert.equal(e.text, "'/home/user/work'")
  const own = await sbx.runCode('x', { context: ctx })
  assert.equal(own.error.name, 'NameError')
  assert.equal((await sbx.runCode('import os; os.getcwd()')).text, "'/home/user'")
  const ids = (await sbx.listCodeContexts()).map((c) => c.id)
  assert.ok(ids.includes(ctx.id))
  await sbx.runCode('y = 1', { context: ctx })
  await sbx.restartCodeContext(ctx)
  assert.equal((await sbx.runCode('y', { context: ctx })).error.name, 'NameError')
  await sbx.removeCodeContext(ctx)
  assert.ok(!(await sbx.listCodeContexts()).map((c) => c.id).includes(ctx.id))
  await assert.rejects(sbx.runCode('1', { context: ctx }), /not found/)
})

test('javascript and bash keep their state', async () => {
  await sbx.runCode('const n = 20', { language: 'javascript' })
  const js = await sbx.runCode('console.log("js"); n * 2', { language: 'js' })
  assert.equal(js.text, '40')
  assert.deepEqual(js.logs.stdout, ['js\n'])
  await sbx.runCode('cd /tmp && v=7', { language: 'bash' })
  const sh = await sbx.runCode('echo "$v $PWD $(id -un)"', { language: 'bash' })
  assert.deepEqual(sh.logs.stdout, ['7 /tmp user\n'])
  const bad = await sbx.runCode('false', { language: 'bash' })
  assert.equal(bad.error.name, 'ExitCodeError')
})

test('a cell past its timeout is interrupted and the state kept', async () => {
  await sbx.runCode('z = "kept"')
  await assert.rejects(
    sbx.runCode('import time\nwhile True:\n    time.sleep(0.05)', { timeoutMs: 2000 }),
    (err) => err.name === 'TimeoutError',
  )
  // Were the loop not interrupted, this would wait for it forever.
  const e = await sbx.runCode('z')
  assert.equal(e.text, "'kept'")
})

test('envs hold for one runCode call, in every language', async () => {
  const py = await sbx.runCode(
    'import os, subprocess\nprint(os.environ["CELL_VAR"], subprocess.run(["sh", "-c", "echo $CELL_VAR"], capture_output=True, text=True).stdout, end="")',
    { envs: { CELL_VAR: 'py value' } },
  )
  assert.equal(py.error, undefined)
  assert.equal(py.logs.stdout.join(''), 'py value py value\n')
  assert.equal((await sbx.runCode('import os; str(os.environ.get("CELL_VAR"))')).text, "'None'")
  const sh = await sbx.runCode('echo "$CELL_VAR"; sh -c \'echo "$CELL_VAR"\'', { language: 'bash', envs: { CELL_VAR: "it's" } })
  assert.equal(sh.logs.stdout.join(''), "it's\nit's\n")
  assert.equal((await sbx.runCode('echo "${CELL_VAR-unset}"', { language: 'bash' })).logs.stdout.join(''), 'unset\n')
  const js = await sbx.runCode('process.env.CELL_VAR', { language: 'js', envs: { CELL_VAR: 'js' } })
  assert.equal(js.text, "'js'")
  assert.equal((await sbx.runCode('String(process.env.CELL_VAR)', { language: 'js' })).text, "'undefined'")
})

test('a bash cell past its timeout is interrupted and the context kept', async () => {
  await sbx.runCode('kept=yes; cd /tmp', { language: 'bash' })
  for (const [cell, envs] of [['sleep 600; echo after', undefined], ['while :; do :; done', { CELL_VAR: 'x' }]]) {
    await assert.rejects(
      sbx.runCode(cell, { language: 'bash', timeoutMs: 2000, envs }),
      (err) => err.name === 'TimeoutError',
    )
    // A bash that died of the interrupt would have lost kept and the cd;
    // the cell's envs are put back too.
    const e = await sbx.runCode('echo "$kept $PWD ${CELL_VAR-unset}"', { language: 'bash' })
    assert.equal(e.error, undefined)
    assert.deepEqual(e.logs.stdout, ['yes /tmp unset\n'])
  }
})
