// The console's end-to-end test in a real browser: Debian's chromium,
// driven by playwright-core, against a real `airlock serve` the Go test
// (console_test.go) started. It exits non-zero on the first failed check.
// Env: AIRLOCK_URL, KEY1, KEY2 (two tenants' API keys), OUT (screenshots),
// CHROMIUM (the browser).
import { chromium } from 'playwright-core';
import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { createRequire } from 'node:module';

const base = process.env.AIRLOCK_URL;
const out = process.env.OUT;
mkdirSync(out, { recursive: true });
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const T = 60000;
const step = (s) => console.log('step: ' + s);
function check(ok, what) { if (!ok) throw new Error('check failed: ' + what); }

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ['--no-sandbox'] });
const executed = []; // dialogs and requests to anywhere but the server
function watch(page, who) {
  page.on('dialog', (d) => { executed.push(who + ': dialog ' + d.message()); d.dismiss(); });
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(base + '/') && !u.startsWith('blob:') && !u.startsWith('data:')) executed.push(who + ': request ' + u);
  });
  page.on('pageerror', (e) => executed.push(who + ': page error ' + e.message));
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/.test(m.text())) executed.push(who + ': CSP ' + m.text()); });
}

async function axe(page, name) {
  await page.evaluate(axeSource);
  const r = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  const v = r.violations.map((x) => x.id + ': ' + x.help + ' [' + x.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ') + ']');
  check(v.length === 0, 'axe on ' + name + ':\n  ' + v.join('\n  '));
}

async function shot(page, name) {
  await page.screenshot({ path: join(out, name + '.png'), fullPage: true });
  await axe(page, name);
}

// Every control reached by Tab has an accessible name, and the main
// navigation is reachable by keyboard alone.
async function keyboard(page, name, mustReach) {
  const seen = [];
  await page.locator('body').focus();
  for (let i = 0; i < 60; i++) {
    await page.keyboard.press('Tab');
    const f = await page.evaluate(() => {
      const e = document.activeElement;
      if (!e || e === document.body) return null;
      const lbl = e.getAttribute('aria-label') || (e.id && document.querySelector('label[for="' + e.id + '"]')?.textContent) ||
        e.closest('label')?.textContent || e.textContent;
      return { tag: e.tagName, name: (lbl || '').trim() };
    });
    if (!f) continue;
    check(f.name !== '', name + ': focusable ' + f.tag + ' without a name');
    seen.push(f.name);
  }
  for (const m of mustReach) check(seen.some((s) => s.includes(m)), name + ': ' + m + ' not reachable by Tab (reached ' + seen.slice(0, 20).join(' | ') + ')');
}

async function login(page, key) {
  await page.goto(base + '/ui/');
  await page.getByLabel('API key').fill(key);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Sandboxes' }).waitFor({ timeout: T });
}

const ctx1 = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
const page = await ctx1.newPage();
watch(page, 'tenant 1');

step('control: the watcher sees a dialog when one opens');
await page.goto(base + '/ui/');
await page.evaluate(() => alert('control')); // returns once the watcher dismissed it
check(executed.length === 1 && executed[0].includes('control'), 'control dialog seen: ' + JSON.stringify(executed));
executed.length = 0;

step('log in');
await page.goto(base + '/ui/');
await shot(page, '01-login');
const cookiesBefore = await ctx1.cookies();
check(cookiesBefore.length === 0, 'no cookie before login');
await login(page, process.env.KEY1);
const ck = (await ctx1.cookies()).find((c) => c.name === 'airlock_console');
check(ck && ck.httpOnly && ck.sameSite === 'Strict', 'session cookie HttpOnly SameSite=Strict: ' + JSON.stringify(ck));
check(await page.evaluate(() => document.cookie) === '', 'script cannot read the session cookie');
await keyboard(page, 'sandboxes', ['Sandboxes', 'New sandbox', 'Images', 'Audit log', 'Log out', 'State', 'Search']);

step('create a sandbox (a refusal first, shown at its field)');
await page.getByRole('link', { name: 'New sandbox' }).click();
await page.getByLabel('Memory limit').fill('lots');
await page.getByRole('button', { name: 'Create' }).click();
await page.locator('#c-memory-err').waitFor({ timeout: T });
check(await page.getByLabel('Memory limit').getAttribute('aria-invalid') === 'true', 'refused field marked invalid');
await shot(page, '03-create-refused');
await page.getByLabel('Memory limit').fill('512Mi');
await page.getByLabel('Network allow-list').fill('example.com');
await page.getByLabel('Labels').fill('owner=<img src=x onerror=alert("label")>\nnote=<script>alert(1)</script>');
await page.getByRole('button', { name: 'Create' }).click();
await page.getByRole('heading', { name: /^Sandbox sb-/ }).waitFor({ timeout: T });
const id = (await page.getByRole('heading', { name: /^Sandbox sb-/ }).textContent()).replace('Sandbox ', '').trim();
step('sandbox ' + id);

step('type in the terminal and see the output');
const term = page.locator('#terminal');
await page.getByText('connected', { exact: true }).waitFor({ timeout: T }).catch(async (e) => {
  throw new Error(e.message + '\n' + await page.locator('main').innerText());
});
await term.click();
await page.keyboard.type('echo hello-$((6*7))');
await page.keyboard.press('Enter');
await term.getByText('hello-42', { exact: true }).waitFor({ timeout: T });
await page.keyboard.type("printf '<img src=x onerror=alert(\"out\")><script>alert(2)</script>\\n'");
await page.keyboard.press('Enter');
await term.getByText('<img src=x onerror=alert("out")><script>alert(2)</script>', { exact: true }).waitFor({ timeout: T });
// The shell's terminal has the widget's size, before and after a resize.
async function sttySize() {
  const want = await term.getAttribute('data-size');
  await page.keyboard.type('stty size');
  await page.keyboard.press('Enter');
  await term.getByText(want, { exact: true }).first().waitFor({ timeout: T }).catch(async (e) => {
    throw new Error(e.message + '\nwidget ' + want + ', terminal text:\n' + await term.innerText());
  });
  return want;
}
const size1 = await sttySize();
await page.setViewportSize({ width: 900, height: 900 });
await page.waitForFunction((s) => document.querySelector('#terminal').dataset.size !== s, size1);
await page.keyboard.type('clear');
await page.keyboard.press('Enter');
const size2 = await sttySize();
step('terminal ' + size1 + ' then ' + size2);

step('a refused write and an egress refusal appear live in the timeline');
const tl = page.locator('section[aria-labelledby="h-tl"]');
await page.keyboard.type('echo x > .envrc; curl -s -m 10 http://blocked.example/; echo done-$((1+1))');
await page.keyboard.press('Enter');
await term.getByText('done-2').first().waitFor({ timeout: T });
await tl.getByText('create /workspace/.envrc: refused by rule envrc').waitFor({ timeout: T });
await tl.getByText(/egress denied blocked\.example:80/).waitFor({ timeout: T });
await page.getByLabel('Egress').uncheck();
check(await tl.getByText(/egress denied/).count() === 0, 'egress filter hides egress events');
check(await tl.getByText(/refused by rule envrc/).count() === 1, 'filter keeps refused writes');
await page.getByLabel('Egress').check();

step('upload, preview and download a file with a hostile name');
const evil = '<img src=x onerror=alert("file")>.txt';
await page.getByLabel('Upload files').setInputFiles({ name: evil, mimeType: 'text/plain', buffer: Buffer.from('uploaded <script>alert(3)</script> body\n') });
await page.getByRole('cell', { name: evil, exact: true }).waitFor({ timeout: T }).catch(async (e) => {
  throw new Error(e.message + '\nfiles section: ' + await page.locator('section[aria-labelledby="h-files"]').innerText());
});
await page.getByRole('button', { name: 'Preview ' + evil }).click();
await page.locator('.preview pre').getByText('uploaded <script>alert(3)</script> body').waitFor({ timeout: T });
const [dl] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download ' + evil }).click()]);
const got = readFileSync(await dl.path(), 'utf8');
check(got === 'uploaded <script>alert(3)</script> body\n', 'downloaded content: ' + JSON.stringify(got));
check(dl.suggestedFilename().includes('onerror'), 'download keeps the name');
await page.keyboard.press('Escape');

step('checkpoint and roll back');
await term.click();
await page.keyboard.type('echo original > ck.txt; echo ok-$((2+1))');
await page.keyboard.press('Enter');
await term.getByText('ok-3').first().waitFor({ timeout: T });
await page.getByLabel('Name', { exact: true }).fill('before');
await page.getByRole('button', { name: 'Create checkpoint' }).click();
await page.getByRole('button', { name: 'Roll back to before' }).waitFor({ timeout: T });
await term.click();
await page.keyboard.type('echo changed > ck.txt; echo ok-$((3+1))');
await page.keyboard.press('Enter');
await term.getByText('ok-4').first().waitFor({ timeout: T });
await page.getByRole('button', { name: 'Roll back to before' }).click();
await page.getByText('Rollback: done').waitFor({ timeout: T });
const content = await page.evaluate(async (p) => (await fetch(p, { headers: { 'X-Airlock-Console': '1' } })).text(),
  '/v1/sandboxes/' + id + '/files?path=/workspace/ck.txt');
check(content === 'original\n', 'rolled back file: ' + JSON.stringify(content));
await page.getByRole('button', { name: 'Preview ck.txt' }).click();
await page.locator('.preview pre').getByText('original').waitFor({ timeout: T });
// The rollback restarted the sandbox's processes, the shell too: a new
// session sees the rolled-back file.
await page.getByRole('button', { name: 'New session' }).click();
await page.getByText('connected', { exact: true }).waitFor({ timeout: T });
await term.click();
await page.keyboard.type('cat ck.txt');
await page.keyboard.press('Enter');
await term.getByText('original', { exact: true }).waitFor({ timeout: T });
await page.locator('.chart').first().waitFor({ timeout: T });
await shot(page, '04-sandbox');

step('pause and resume');
await page.getByRole('button', { name: 'Pause' }).click();
await page.getByRole('button', { name: 'Resume' }).waitFor({ timeout: T });
check(await page.locator('.facts .state').textContent() !== 'running', 'paused');
await page.getByRole('button', { name: 'Resume' }).click();
await page.getByRole('button', { name: 'Pause' }).waitFor({ timeout: T });
await page.getByText('Resume: done').waitFor({ timeout: T });

step('a limit kill appears live in the timeline');
if (await page.getByRole('button', { name: 'New session' }).count()) await page.getByRole('button', { name: 'New session' }).click();
await page.getByText('connected', { exact: true }).waitFor({ timeout: T });
await term.click();
await page.keyboard.type("exec python3 -c 'b = bytearray(1 << 31)'"); // 2 GiB under a 512 MiB limit
await page.keyboard.press('Enter');
await tl.getByText('killed by the memory limit').waitFor({ timeout: T });
await page.getByLabel('Limit kills').uncheck();
check(await tl.getByText('killed by the memory limit').count() === 0, 'limit filter hides limit kills');
await page.getByLabel('Limit kills').check();

step('lists and audit log');
await page.getByRole('link', { name: 'Sandboxes' }).click();
await page.getByRole('link', { name: id }).waitFor({ timeout: T });
await page.getByRole('cell', { name: /onerror=alert\("label"\)/ }).waitFor({ timeout: T });
await page.getByLabel('State').selectOption('stopped');
check(await page.getByRole('link', { name: id }).count() === 0, 'state filter hides the running sandbox');
await page.getByLabel('State').selectOption('');
await shot(page, '02-sandboxes');
await page.getByRole('link', { name: 'Images' }).click();
await page.getByRole('heading', { name: 'Images' }).waitFor();
await shot(page, '05-images');
await page.getByRole('link', { name: 'Audit log' }).click();
await page.getByText('create /workspace/.envrc: refused by rule envrc').waitFor({ timeout: T });
await page.getByLabel('Search').fill('blocked.example');
await page.getByText(/egress denied blocked\.example/).waitFor({ timeout: T });
check(await page.getByText(/refused by rule envrc/).count() === 0, 'audit search filters');
await shot(page, '06-audit');
await page.getByRole('link', { name: 'New sandbox' }).click();
await shot(page, '03-create');

step('a CSRF attempt: the session without the console header is refused');
const csrf = await page.evaluate(async () => (await fetch('/v1/sandboxes', { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: '{}' })).status);
check(csrf === 403, 'POST without the console header: ' + csrf);

step('another tenant sees nothing of the first');
const ctx2 = await browser.newContext();
const p2 = await ctx2.newPage();
watch(p2, 'tenant 2');
await login(p2, process.env.KEY2);
await p2.getByText('0 of 0 sandboxes').waitFor({ timeout: T });
await p2.goto(base + '/ui/#/sandbox/' + id);
await p2.getByRole('alert').filter({ hasText: /not found|no sandbox/i }).waitFor({ timeout: T });
await p2.goto(base + '/ui/#/audit');
await p2.getByText('0 events').waitFor({ timeout: T });
await shot(p2, '07-other-tenant');

step('log out');
await page.getByRole('button', { name: 'Log out' }).click();
await page.getByLabel('API key').waitFor();
const after = await page.evaluate(async () => (await fetch('/v1/sandboxes', { headers: { 'X-Airlock-Console': '1' } })).status);
check(after === 401, 'after logout: ' + after);

check(executed.length === 0, 'nothing from a sandbox ran or called out:\n  ' + executed.join('\n  '));
await browser.close();
console.log('PASS');
