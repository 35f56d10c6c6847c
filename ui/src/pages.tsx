// The list pages: sandboxes, create, images, audit log.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { APIError, age, bytes, json, sb } from './api';

export function usePoll<T>(f: () => Promise<T>, ms: number, deps: unknown[] = []): [T | undefined, string, () => void] {
  const [v, setV] = useState<T>();
  const [err, setErr] = useState('');
  const load = () => f().then((x) => { setV(x); setErr(''); }, (e) => setErr(e.message));
  useEffect(() => {
    load();
    const t = setInterval(load, ms);
    return () => clearInterval(t);
  }, deps);
  return [v, err, load];
}

export function Field(p: { id: string; label: string; err?: string; children: any }) {
  return (
    <div class="field">
      <label for={p.id}>{p.label}</label>
      {p.children}
      {p.err && <p id={p.id + '-err'} class="error" role="alert">{p.err}</p>}
    </div>
  );
}

const val = (e: Event) => (e.target as HTMLInputElement).value;

export function Sandboxes() {
  const [list, err] = usePoll(() => json('GET', '/v1/sandboxes').then((r) => r.sandboxes as any[]), 3000);
  const [state, setState] = useState('');
  const [backend, setBackend] = useState('');
  const [q, setQ] = useState('');
  const rows = useMemo(() => (list ?? []).filter((s) =>
    (!state || s.state === state) && (!backend || s.backend === backend) &&
    (!q || (s.id + ' ' + (s.image ?? '') + ' ' + JSON.stringify(s.labels ?? {})).includes(q))), [list, state, backend, q]);
  const backends = [...new Set((list ?? []).map((s) => s.backend))].sort();
  return (
    <section aria-labelledby="h-sb">
      <h1 id="h-sb">Sandboxes</h1>
      <div class="filters">
        <Field id="f-state" label="State">
          <select id="f-state" value={state} onChange={(e) => setState(val(e))}>
            <option value="">any</option>
            {['running', 'frozen', 'paused', 'stopped'].map((s) => <option value={s}>{s}</option>)}
          </select>
        </Field>
        <Field id="f-backend" label="Backend">
          <select id="f-backend" value={backend} onChange={(e) => setBackend(val(e))}>
            <option value="">any</option>
            {backends.map((b) => <option value={b}>{b}</option>)}
          </select>
        </Field>
        <Field id="f-q" label="Search">
          <input id="f-q" type="search" value={q} onInput={(e) => setQ(val(e))} />
        </Field>
      </div>
      {err && <p class="error" role="alert">{err}</p>}
      <table>
        <caption>{rows.length} of {list?.length ?? 0} sandboxes</caption>
        <thead><tr><th scope="col">ID</th><th scope="col">State</th><th scope="col">Backend</th><th scope="col">Image</th>
          <th scope="col">Age</th><th scope="col">CPU</th><th scope="col">Memory</th><th scope="col">Labels</th></tr></thead>
        <tbody>
          {rows.map((s) => (
            <tr key={s.id}>
              <td><a href={'#/sandbox/' + encodeURIComponent(s.id)}>{s.id}</a></td>
              <td><span class={'state ' + s.state}>{s.state}</span></td>
              <td>{s.backend}</td><td>{s.image || '(host)'}</td><td>{age(s.created_at)}</td>
              <td>{s.stats ? (s.stats.cpu_nanos / 1e9).toFixed(2) + ' s' : ''}</td>
              <td>{s.stats ? bytes(s.stats.memory_bytes) : ''}{s.memory_max_bytes ? ' / ' + bytes(s.memory_max_bytes) : ''}</td>
              <td>{Object.entries(s.labels ?? {}).map(([k, v]) => k + '=' + v).join(', ')}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

// fieldOf says which form field a refusal is about, from the message.
function fieldOf(msg: string): string {
  const m = msg.toLowerCase();
  for (const [k, f] of [['network', 'allow'], ['allow', 'allow'], ['memory', 'memory'], ['cpu', 'cpus'], ['image', 'image'],
    ['backend', 'backend'], ['profile', 'profile'], ['timeout', 'timeout'], ['label', 'labels']] as const) {
    if (m.includes(k)) return f;
  }
  return 'form';
}

export function Create() {
  const [f, setF] = useState({ backend: 'native', image: '', profile: '', timeout: '10m', memory: '', cpus: '', allow: '', labels: '' });
  const [err, setErr] = useState<{ field: string; msg: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const set = (k: keyof typeof f) => (e: Event) => setF({ ...f, [k]: val(e) });
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true); setErr(null);
    const policy: any = {};
    if (f.memory || f.cpus) policy.limits = { ...(f.memory && { memory: f.memory }), ...(f.cpus && { cpus: Number(f.cpus) }) };
    const allow = f.allow.split(/[\s,]+/).filter(Boolean);
    if (allow.length) policy.network = { mode: 'allowlist', allow };
    const labels: Record<string, string> = {};
    for (const kv of f.labels.split('\n').map((l) => l.trim()).filter(Boolean)) { const [k, ...v] = kv.split('='); labels[k] = v.join('='); }
    try {
      const s = await json('POST', '/v1/sandboxes', {
        backend: f.backend || undefined, image: f.image || undefined, profile: f.profile || undefined,
        timeout: f.timeout || undefined, labels, policy: Object.keys(policy).length ? policy : undefined,
      });
      location.hash = '#/sandbox/' + encodeURIComponent(s.id);
    } catch (x: any) {
      setErr({ field: x instanceof APIError ? fieldOf(x.message) : 'form', msg: x.message });
    } finally { setBusy(false); }
  };
  const fe = (k: string) => (err?.field === k ? err.msg : undefined);
  const inp = (k: keyof typeof f, extra: any = {}) => (
    <input id={'c-' + k} value={f[k]} onInput={set(k)} aria-invalid={err?.field === k ? 'true' : undefined}
      aria-describedby={err?.field === k ? 'c-' + k + '-err' : undefined} {...extra} />
  );
  return (
    <section aria-labelledby="h-new">
      <h1 id="h-new">New sandbox</h1>
      <form onSubmit={submit} class="create">
        <Field id="c-backend" label="Backend" err={fe('backend')}>{inp('backend', { list: 'backends' })}</Field>
        <datalist id="backends">{['native', 'gvisor', 'docker', 'microvm', 'wasm', 'auto'].map((b) => <option value={b} />)}</datalist>
        <Field id="c-image" label="Image (empty: the host's files)" err={fe('image')}>{inp('image')}</Field>
        <Field id="c-profile" label="Profile" err={fe('profile')}>{inp('profile', { placeholder: 'default' })}</Field>
        <Field id="c-timeout" label="Lifetime" err={fe('timeout')}>{inp('timeout')}</Field>
        <Field id="c-memory" label="Memory limit (e.g. 512Mi)" err={fe('memory')}>{inp('memory')}</Field>
        <Field id="c-cpus" label="CPUs" err={fe('cpus')}>{inp('cpus', { inputMode: 'decimal' })}</Field>
        <Field id="c-allow" label="Network allow-list (hosts, one per line; empty: the profile's)" err={fe('allow')}>
          <textarea id="c-allow" rows={3} value={f.allow} onInput={set('allow')} aria-invalid={err?.field === 'allow' ? 'true' : undefined}
            aria-describedby={err?.field === 'allow' ? 'c-allow-err' : undefined} />
        </Field>
        <Field id="c-labels" label="Labels (key=value, one per line)" err={fe('labels')}>
          <textarea id="c-labels" rows={2} value={f.labels} onInput={set('labels')} aria-invalid={err?.field === 'labels' ? 'true' : undefined}
            aria-describedby={err?.field === 'labels' ? 'c-labels-err' : undefined} />
        </Field>
        <button type="submit" disabled={busy}>{busy ? 'Creating…' : 'Create'}</button>
        {err?.field === 'form' && <p class="error" role="alert">{err.msg}</p>}
      </form>
    </section>
  );
}

export function Images() {
  const [list, err] = usePoll(() => json('GET', '/v1/images').then((r) => r.images as any[]), 10000);
  return (
    <section aria-labelledby="h-img">
      <h1 id="h-img">Images</h1>
      {err && <p class="error" role="alert">{err}</p>}
      <table>
        <caption>{list?.length ?? 0} images</caption>
        <thead><tr><th scope="col">Names</th><th scope="col">ID</th><th scope="col">Platform</th><th scope="col">Size</th><th scope="col">Added</th></tr></thead>
        <tbody>{(list ?? []).map((i) => (
          <tr key={i.id}><td>{(i.names ?? []).join(', ')}</td><td><code>{String(i.id).slice(0, 19)}</code></td>
            <td>{i.platform}</td><td>{bytes(i.size)}</td><td>{i.added ? age(i.added) + ' ago' : ''}</td></tr>
        ))}</tbody>
      </table>
    </section>
  );
}

// Audit: the tenant's sandboxes' events, newest sandboxes first (the API
// has events per sandbox; the console merges them).
export function Audit() {
  const [evs, err] = usePoll(async () => {
    const list: any[] = (await json('GET', '/v1/sandboxes')).sandboxes;
    list.sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
    const all = await Promise.all(list.slice(0, 50).map((s) => json('GET', sb(s.id) + '/events').then((r) => r.events as any[], () => [])));
    return all.flat().sort((a, b) => Date.parse(b.time) - Date.parse(a.time));
  }, 10000);
  const [q, setQ] = useState('');
  const [type, setType] = useState('');
  const rows = (evs ?? []).filter((e) => (!type || e.type === type) &&
    (!q || (e.sandbox + ' ' + e.type + ' ' + (e.message ?? '') + ' ' + JSON.stringify(e.fields ?? {})).toLowerCase().includes(q.toLowerCase())));
  return (
    <section aria-labelledby="h-audit">
      <h1 id="h-audit">Audit log</h1>
      <div class="filters">
        <Field id="a-q" label="Search"><input id="a-q" type="search" value={q} onInput={(e) => setQ(val(e))} /></Field>
        <Field id="a-type" label="Type">
          <select id="a-type" value={type} onChange={(e) => setType(val(e))}>
            <option value="">any</option>
            {[...new Set((evs ?? []).map((e) => e.type))].sort().map((t) => <option value={t}>{t}</option>)}
          </select>
        </Field>
      </div>
      {err && <p class="error" role="alert">{err}</p>}
      <EventTable events={rows.slice(0, 2000)} showSandbox />
    </section>
  );
}

export function EventTable({ events, showSandbox }: { events: any[]; showSandbox?: boolean }) {
  return (
    <table class="events">
      <caption>{events.length} events</caption>
      <thead><tr><th scope="col">Time</th>{showSandbox && <th scope="col">Sandbox</th>}<th scope="col">Type</th><th scope="col">What</th></tr></thead>
      <tbody>{events.map((e) => (
        <tr key={e.sandbox + e.seq} class={'ev-' + e.type + (String(e.message ?? '').startsWith('egress denied') ? ' refused' : '')}>
          <td>{new Date(e.time).toLocaleTimeString()}</td>
          {showSandbox && <td><a href={'#/sandbox/' + encodeURIComponent(e.sandbox)}>{e.sandbox}</a></td>}
          <td>{e.type}</td>
          <td>{e.message}{e.fields && <span class="fields"> {Object.entries(e.fields).map(([k, v]) => k + '=' + (typeof v === 'string' ? v : JSON.stringify(v))).join(' ')}</span>}</td>
        </tr>
      ))}</tbody>
    </table>
  );
}
