// Every call the console makes: the public /v1 API (and /ui/login), with
// the session cookie the browser holds and the console header the server
// requires of cookie requests (CSRF).
export class APIError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
}

const H = { 'X-Airlock-Console': '1' };

export async function call(method: string, path: string, body?: unknown, raw?: BodyInit): Promise<Response> {
  const headers: Record<string, string> = { ...H };
  let b: BodyInit | undefined = raw;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    b = JSON.stringify(body);
  }
  const r = await fetch(path, { method, headers, body: b, credentials: 'same-origin' });
  if (!r.ok) {
    let code = 'error', msg = r.statusText;
    try {
      const j = await r.json();
      code = j.error?.code ?? code;
      msg = j.error?.message ?? msg;
    } catch { /* not JSON */ }
    if (r.status === 401) window.dispatchEvent(new Event('airlock-logout'));
    throw new APIError(r.status, code, msg);
  }
  return r;
}

export async function json<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const r = await call(method, path, body);
  if (r.status === 204) return undefined as T;
  return r.json();
}

export const sb = (id: string) => '/v1/sandboxes/' + encodeURIComponent(id);

// followEvents reads a sandbox's event stream (NDJSON) and calls on for
// each event until stop is called. The server ends the stream when the
// sandbox stops running (a pause, a rollback): it follows again from the
// last event seen, so events after a resume keep coming.
export function followEvents(id: string, on: (v: any) => void): () => void {
  const ctl = new AbortController();
  let after = 0;
  const once = async () => {
    const r = await fetch(sb(id) + '/events?follow=true&after=' + after, { headers: H, signal: ctl.signal, credentials: 'same-origin' });
    if (!r.ok || !r.body) return;
    const rd = r.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await rd.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line) continue;
        const e = JSON.parse(line);
        after = Math.max(after, e.seq ?? 0);
        on(e);
      }
    }
  };
  (async () => {
    while (!ctl.signal.aborted) {
      await once().catch(() => {});
      await new Promise((res) => setTimeout(res, 2000));
    }
  })();
  return () => ctl.abort();
}

export function bytes(n?: number): string {
  if (!n) return '0';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + ' ' + u[i];
}

export function age(t: string): string {
  const s = Math.max(0, (Date.now() - Date.parse(t)) / 1000);
  if (s < 60) return Math.floor(s) + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm';
  if (s < 86400) return Math.floor(s / 3600) + 'h';
  return Math.floor(s / 86400) + 'd';
}
