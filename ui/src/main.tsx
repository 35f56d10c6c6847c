// The Airlock console: a client of the /v1 API. Everything a sandbox can
// influence (output, file names, metadata, events) is rendered as text by
// Preact (never as HTML), and the page's CSP forbids inline script.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { json } from './api';
import { Sandboxes, Create, Images, Audit } from './pages';
import { SandboxPage } from './sandbox';

function useRoute(): string {
  const [h, setH] = useState(location.hash);
  useEffect(() => {
    const f = () => setH(location.hash);
    window.addEventListener('hashchange', f);
    return () => window.removeEventListener('hashchange', f);
  }, []);
  return h.replace(/^#\/?/, '');
}

function Login({ onIn }: { onIn: (t: string) => void }) {
  const [key, setKey] = useState('');
  const [err, setErr] = useState('');
  useEffect(() => {
    const m = /^#login=([A-Za-z0-9_-]+)$/.exec(location.hash);
    if (!m) return;
    history.replaceState(null, '', '/ui/');
    json('POST', '/ui/login', { link: m[1] }).then((r) => onIn(r.tenant), (e) => setErr(e.message));
  }, []);
  const submit = async (e: Event) => {
    e.preventDefault();
    try { onIn((await json('POST', '/ui/login', { key })).tenant); } catch (x: any) { setErr(x.message); }
  };
  return (
    <main class="login">
      <h1>Airlock console</h1>
      <form onSubmit={submit}>
        <label for="key">API key</label>
        <input id="key" type="password" autocomplete="off" value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)}
          aria-describedby={err ? 'login-err' : undefined} required />
        <button type="submit">Log in</button>
        {err && <p id="login-err" class="error" role="alert">{err}</p>}
      </form>
      <p class="hint">Or run <code>airlock console</code> on the server for a one-time link.</p>
    </main>
  );
}

function App() {
  const [tenant, setTenant] = useState<string | null | undefined>(undefined);
  const route = useRoute();
  useEffect(() => {
    if (location.hash.startsWith('#login=')) { setTenant(null); return; }
    json('GET', '/ui/session').then((r) => setTenant(r.tenant), () => setTenant(null));
    const out = () => setTenant(null);
    window.addEventListener('airlock-logout', out);
    return () => window.removeEventListener('airlock-logout', out);
  }, []);
  if (tenant === undefined) return <p>Loading…</p>;
  if (tenant === null) return <Login onIn={(t) => { setTenant(t); location.hash = '#/'; }} />;
  const [page, ...rest] = route.split('/');
  const logout = async () => { await json('POST', '/ui/logout').catch(() => {}); setTenant(null); };
  let body;
  if (page === 'sandbox' && rest[0]) body = <SandboxPage id={decodeURIComponent(rest[0])} />;
  else if (page === 'new') body = <Create />;
  else if (page === 'images') body = <Images />;
  else if (page === 'audit') body = <Audit />;
  else body = <Sandboxes />;
  const cur = (p: string) => (page === p || (p === '' && !['new', 'images', 'audit', 'sandbox'].includes(page)) ? 'page' : undefined);
  return (
    <>
      <header>
        <nav aria-label="Main">
          <strong>Airlock</strong>
          <a href="#/" aria-current={cur('')}>Sandboxes</a>
          <a href="#/new" aria-current={cur('new')}>New sandbox</a>
          <a href="#/images" aria-current={cur('images')}>Images</a>
          <a href="#/audit" aria-current={cur('audit')}>Audit log</a>
        </nav>
        <span class="who">tenant <b>{tenant}</b> <button type="button" onClick={logout}>Log out</button></span>
      </header>
      <main>{body}</main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
