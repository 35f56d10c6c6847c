// One sandbox: controls, terminal, files, processes, ports, checkpoints
// and the live timeline of its audit events.
import { useEffect, useRef, useState } from 'preact/hooks';
import { bytes, age, call, followEvents, json, sb } from './api';
import { EventTable, Field, usePoll } from './pages';
import { Terminal } from './term';

export function SandboxPage({ id }: { id: string }) {
  const [s, err, reload] = usePoll(() => json('GET', sb(id)), 3000, [id]);
  const [msg, setMsg] = useState('');
  const act = (label: string, f: () => Promise<unknown>) => async () => {
    setMsg('');
    try { await f(); setMsg(label + ': done'); reload(); } catch (e: any) { setMsg(label + ': ' + e.message); }
  };
  if (!s) return <p role={err ? 'alert' : undefined}>{err || 'Loading…'}</p>;
  const live = s.state === 'running';
  return (
    <section aria-labelledby="h-one">
      <h1 id="h-one">Sandbox <code>{s.id}</code></h1>
      <dl class="facts">
        <dt>State</dt><dd><span class={'state ' + s.state}>{s.state}</span>{s.reason ? ' (' + s.reason + ')' : ''}</dd>
        <dt>Backend</dt><dd>{s.backend}</dd><dt>Image</dt><dd>{s.image || '(host)'}</dd>
        <dt>Profile</dt><dd>{s.profile || 'default'}</dd><dt>Age</dt><dd>{age(s.created_at)}</dd>
        <dt>CPU</dt><dd>{s.stats ? (s.stats.cpu_nanos / 1e9).toFixed(2) + ' s' : '–'}</dd>
        <dt>Memory</dt><dd>{s.stats ? bytes(s.stats.memory_bytes) + ' (peak ' + bytes(s.stats.memory_peak_bytes) + ')' : '–'}</dd>
        <dt>Labels</dt><dd>{Object.entries(s.labels ?? {}).map(([k, v]) => k + '=' + v).join(', ') || '–'}</dd>
      </dl>
      <Usage s={s} />
      <div class="actions">
        {live && <button type="button" onClick={act('Pause', () => json('POST', sb(id) + '/pause'))}>Pause</button>}
        {(s.state === 'paused' || s.state === 'frozen') && <button type="button" onClick={act('Resume', () => json('POST', sb(id) + '/resume'))}>Resume</button>}
        {s.state !== 'stopped' && <button type="button" class="danger" onClick={act('Delete', () => json('DELETE', sb(id)))}>Delete</button>}
        <span role="status">{msg}</span>
      </div>
      {live && <TermBox id={id} />}
      {live && <Files id={id} home={s.workdir || '/'} />}
      {live && <Procs id={id} />}
      {live && <Ports id={id} />}
      {s.state !== 'stopped' && <Checkpoints id={id} />}
      <Timeline id={id} />
    </section>
  );
}

// Usage charts CPU (cores used between samples) and memory, sampled
// from the sandbox's stats while the page is open.
function Usage({ s }: { s: any }) {
  const [pts, setPts] = useState<{ t: number; cpu: number; mem: number }[]>([]);
  useEffect(() => {
    if (!s.stats) return;
    setPts((p) => [...p, { t: Date.now(), cpu: s.stats.cpu_nanos, mem: s.stats.memory_bytes }].slice(-200));
  }, [s]);
  if (pts.length < 2) return null;
  const cpu = pts.slice(1).map((p, i) => Math.max(0, (p.cpu - pts[i].cpu) / 1e6 / Math.max(1, p.t - pts[i].t)));
  const mem = pts.map((p) => p.mem);
  return (
    <div class="charts">
      <Chart label="CPU (cores)" values={cpu} fmt={(v) => v.toFixed(2)} />
      <Chart label="Memory" values={mem} fmt={bytes} />
    </div>
  );
}

function Chart({ label, values, fmt }: { label: string; values: number[]; fmt: (v: number) => string }) {
  const max = Math.max(...values, 1e-9), w = 240, h = 48;
  const line = values.map((v, i) => (i * w) / Math.max(1, values.length - 1) + ',' + (h - (v / max) * h).toFixed(1)).join(' ');
  const last = values[values.length - 1];
  return (
    <figure class="chart">
      <svg width={w} height={h} viewBox={'0 0 ' + w + ' ' + h} role="img" aria-label={label + ' over time, now ' + fmt(last) + ', peak ' + fmt(max)}>
        <polyline points={line} fill="none" stroke="currentColor" stroke-width="1.5" />
      </svg>
      <figcaption>{label}: {fmt(last)} (peak {fmt(max)})</figcaption>
    </figure>
  );
}

function TermBox({ id }: { id: string }) {
  const ref = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState('connecting');
  const [n, setN] = useState(0); // bumped by "New session": a fresh shell
  useEffect(() => {
    ref.current!.replaceChildren();
    setStatus('connecting');
    const t = new Terminal(ref.current!);
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(proto + '//' + location.host + sb(id) + '/pty');
    ws.binaryType = 'arraybuffer';
    const enc = new TextEncoder();
    let started = false; // the first message must be the start message
    t.onData = (d) => started && ws.readyState === 1 && ws.send(enc.encode(d));
    t.onResize = (rows, cols) => started && ws.send(JSON.stringify({ type: 'resize', rows, cols }));
    ws.onopen = () => {
      t.fit();
      started = true;
      ws.send(JSON.stringify({ args: ['/bin/sh', '-c', 'command -v bash >/dev/null && exec bash -i || exec sh -i'], rows: t.rows, cols: t.cols }));
      setStatus('connected');
    };
    ws.onmessage = (m) => {
      if (typeof m.data !== 'string') { t.write(new Uint8Array(m.data)); return; }
      const c = JSON.parse(m.data);
      if (c.type === 'exit') setStatus('exited' + (c.exit ? ' (' + JSON.stringify(c.exit) + ')' : ''));
      if (c.type === 'error') setStatus('error: ' + (c.error?.message ?? ''));
    };
    ws.onclose = () => setStatus((s) => (s === 'connected' ? 'closed' : s));
    return () => { started = false; ws.close(); };
  }, [id, n]);
  return (
    <section aria-labelledby="h-term">
      <h2 id="h-term">Terminal <small role="status">{status}</small></h2>
      {status !== 'connected' && status !== 'connecting' && <button type="button" onClick={() => setN(n + 1)}>New session</button>}
      <div ref={ref} id="terminal" aria-label="Terminal (Tab leaves it; Ctrl+I completes)" />
    </section>
  );
}

function join(dir: string, name: string) { return (dir.endsWith('/') ? dir : dir + '/') + name; }

function Files({ id, home }: { id: string; home: string }) {
  const [dir, setDir] = useState(home);
  const [list, err, reload] = usePoll(async () => {
    const r = await json('GET', sb(id) + '/files/list?path=' + encodeURIComponent(dir));
    return r.files as any[];
  }, 5000, [id, dir]);
  const [preview, setPreview] = useState<{ name: string; text?: string; img?: string } | null>(null);
  const [msg, setMsg] = useState('');
  const cwd = dir;
  const fetchBlob = async (p: string) => (await call('GET', sb(id) + '/files?path=' + encodeURIComponent(p))).blob();
  const download = async (f: any) => {
    const url = URL.createObjectURL(await fetchBlob(f.path));
    const a = document.createElement('a');
    a.href = url; a.download = f.name; a.click();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  };
  const show = async (f: any) => {
    const b = await fetchBlob(f.path);
    if (/\.(png|jpe?g|gif|webp)$/i.test(f.name)) setPreview({ name: f.name, img: URL.createObjectURL(b) });
    else setPreview({ name: f.name, text: (await b.slice(0, 65536).text()) });
  };
  const upload = async (e: Event) => {
    const input = e.target as HTMLInputElement;
    for (const file of Array.from(input.files ?? [])) {
      try {
        await call('PUT', sb(id) + '/files?path=' + encodeURIComponent(join(cwd, file.name)), undefined, file);
        setMsg('uploaded ' + file.name);
      } catch (x: any) { setMsg(x.message); }
    }
    input.value = '';
    reload();
  };
  const up = cwd.replace(/\/[^/]*$/, '') || '/';
  return (
    <section aria-labelledby="h-files">
      <h2 id="h-files">Files in <code>{cwd}</code></h2>
      <div class="actions">
        <button type="button" onClick={() => setDir(up)} disabled={cwd === '/'}>Up</button>
        <label class="upload">Upload files <input type="file" multiple onChange={upload} /></label>
        <span role="status">{msg}</span>
      </div>
      {err && <p class="error" role="alert">{err}</p>}
      <table>
        <caption class="sr-only">Files</caption>
        <thead><tr><th scope="col">Name</th><th scope="col">Size</th><th scope="col">Modified</th><th scope="col">Actions</th></tr></thead>
        <tbody>{(list ?? []).map((f) => (
          <tr key={f.path}>
            <td>{f.is_dir ? <button type="button" class="link" onClick={() => setDir(f.path)}>{f.name}/</button> : f.name}{f.link ? ' → ' + f.link : ''}</td>
            <td>{f.is_dir ? '' : bytes(f.size)}</td><td>{age(f.mod_time)}</td>
            <td>{!f.is_dir && <>
              <button type="button" onClick={() => show(f)} aria-label={'Preview ' + f.name}>Preview</button>
              <button type="button" onClick={() => download(f)} aria-label={'Download ' + f.name}>Download</button></>}</td>
          </tr>
        ))}</tbody>
      </table>
      {preview && (
        <figure class="preview">
          <figcaption>{preview.name} <button type="button" onClick={() => setPreview(null)}>Close preview</button></figcaption>
          {preview.img ? <img src={preview.img} alt={'Preview of ' + preview.name} /> : <pre>{preview.text}</pre>}
        </figure>
      )}
    </section>
  );
}

function Procs({ id }: { id: string }) {
  const [list, err, reload] = usePoll(() => json('GET', sb(id) + '/processes').then((r) => r.processes as any[]), 5000, [id]);
  return (
    <section aria-labelledby="h-procs">
      <h2 id="h-procs">Processes</h2>
      {err && <p class="error" role="alert">{err}</p>}
      <table>
        <caption class="sr-only">Processes</caption>
        <thead><tr><th scope="col">ID</th><th scope="col">PID</th><th scope="col">Command</th><th scope="col">State</th><th scope="col">Actions</th></tr></thead>
        <tbody>{(list ?? []).map((p) => (
          <tr key={p.id}><td>{p.id}</td><td>{p.pid}</td><td><code>{(p.args ?? []).join(' ')}</code></td>
            <td>{p.running ? 'running' : 'exited ' + JSON.stringify(p.exit ?? {})}</td>
            <td>{p.running && <button type="button" aria-label={'Kill process ' + p.id}
              onClick={() => json('DELETE', sb(id) + '/processes/' + encodeURIComponent(p.id)).then(reload, reload)}>Kill</button>}</td></tr>
        ))}</tbody>
      </table>
    </section>
  );
}

function Ports({ id }: { id: string }) {
  const [port, setPort] = useState('8000');
  const [links, setLinks] = useState<any[]>([]);
  const [err, setErr] = useState('');
  const open = async (e: Event) => {
    e.preventDefault();
    try {
      const t = await json('POST', sb(id) + '/port-tokens', { port: Number(port) });
      setLinks([t, ...links.filter((l) => l.port !== t.port)]); setErr('');
    } catch (x: any) { setErr(x.message); }
  };
  return (
    <section aria-labelledby="h-ports">
      <h2 id="h-ports">Ports</h2>
      <form onSubmit={open} class="inline">
        <Field id="p-port" label="Port" err={err}>
          <input id="p-port" inputMode="numeric" value={port} onInput={(e) => setPort((e.target as HTMLInputElement).value)} />
        </Field>
        <button type="submit">Make preview link</button>
      </form>
      <ul>{links.map((l) => (
        <li key={l.port}>port {l.port}: <a href={l.preview_url || l.url} target="_blank" rel="noopener noreferrer">preview</a> (until {new Date(l.expires_at).toLocaleTimeString()})</li>
      ))}</ul>
    </section>
  );
}

function Checkpoints({ id }: { id: string }) {
  const [list, err, reload] = usePoll(() => json('GET', sb(id) + '/checkpoints').then((r) => r.checkpoints as any[]), 10000, [id]);
  const [name, setName] = useState('');
  const [msg, setMsg] = useState('');
  const run = (label: string, f: () => Promise<unknown>) => async (e?: Event) => {
    e?.preventDefault();
    try { await f(); setMsg(label + ': done'); } catch (x: any) { setMsg(label + ': ' + x.message); }
    reload();
  };
  return (
    <section aria-labelledby="h-cp">
      <h2 id="h-cp">Checkpoints</h2>
      <form class="inline" onSubmit={run('Checkpoint', () => json('POST', sb(id) + '/checkpoints', { name: name || undefined }))}>
        <Field id="cp-name" label="Name"><input id="cp-name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} /></Field>
        <button type="submit">Create checkpoint</button>
        <span role="status">{msg}</span>
      </form>
      {err && <p class="error" role="alert">{err}</p>}
      <table>
        <caption class="sr-only">Checkpoints</caption>
        <thead><tr><th scope="col">Name</th><th scope="col">ID</th><th scope="col">Files</th><th scope="col">Size</th><th scope="col">Made</th><th scope="col">Actions</th></tr></thead>
        <tbody>{(list ?? []).map((c) => (
          <tr key={c.id}><td>{c.name}</td><td><code>{c.id}</code></td><td>{c.files}</td><td>{bytes(c.bytes)}</td><td>{age(c.created_at)} ago</td>
            <td><button type="button" aria-label={'Roll back to ' + (c.name || c.id)}
              onClick={run('Rollback', () => json('POST', sb(id) + '/rollback', { checkpoint: c.id }))}>Roll back</button></td></tr>
        ))}</tbody>
      </table>
    </section>
  );
}

const kinds: Record<string, (e: any) => boolean> = {
  'Refused writes': (e) => e.type === 'denied' || e.type === 'violation',
  Egress: (e) => e.type === 'egress',
  'Limit kills': (e) => e.type === 'limit',
  Other: (e) => !['denied', 'violation', 'egress', 'limit'].includes(e.type),
};

function Timeline({ id }: { id: string }) {
  const [evs, setEvs] = useState<any[]>([]);
  const [on, setOn] = useState<Record<string, boolean>>({ 'Refused writes': true, Egress: true, 'Limit kills': true, Other: true });
  useEffect(() => {
    setEvs([]);
    const buf: any[] = [];
    let t = 0;
    const stop = followEvents(id, (e) => {
      buf.push(e);
      if (!t) t = window.setTimeout(() => { t = 0; setEvs((v) => [...buf.splice(0).reverse(), ...v].slice(0, 5000)); }, 100);
    });
    return () => { stop(); clearTimeout(t); };
  }, [id]);
  const shown = evs.filter((e) => Object.entries(kinds).some(([k, f]) => on[k] && f(e)));
  return (
    <section aria-labelledby="h-tl">
      <h2 id="h-tl">Timeline (live)</h2>
      <fieldset class="filters">
        <legend>Show</legend>
        {Object.keys(kinds).map((k) => (
          <label key={k}><input type="checkbox" checked={on[k]} onChange={() => setOn({ ...on, [k]: !on[k] })} /> {k}</label>
        ))}
      </fieldset>
      <div aria-live="polite"><EventTable events={shown} /></div>
    </section>
  );
}
