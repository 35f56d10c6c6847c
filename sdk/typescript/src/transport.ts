/**
 * HTTP to `airlock serve` with fetch: the global fetch for http(s):// hosts,
 * and for the unix socket a fetch-compatible function over node:http (the
 * global fetch cannot dial unix sockets without a third-party dispatcher).
 */
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";
import { Readable } from "node:stream";

import { AirlockError, errorFor, InvalidError } from "./errors.js";
import { ROUTES, type Operation } from "./routes.js";
import type { Frame } from "./types.js";

export type Fetch = (input: string, init?: RequestInit) => Promise<Response>;

/** Where the SDK finds the server. */
export interface ConnectionOptions {
  /** unix:///path.sock, /path.sock or http(s)://host:port; default $AIRLOCK_HOST, else the local socket. */
  host?: string;
  /** Bearer key; default $AIRLOCK_API_KEY. */
  apiKey?: string;
  /** A fetch to use instead (tests, proxies). */
  fetch?: Fetch;
}

/** Where `airlock serve` listens by default (as the Go SDK decides). */
export function defaultSocket(): string {
  if (process.geteuid?.() === 0) return "/run/airlock/airlock.sock";
  const run = process.env.XDG_RUNTIME_DIR;
  if (run) return path.join(run, "airlock", "airlock.sock");
  return path.join(os.tmpdir(), `airlock-${process.geteuid?.() ?? 0}`, "airlock.sock");
}

/** A fetch that sends every request to the unix socket socketPath. */
export function unixFetch(socketPath: string): Fetch {
  return (input, init = {}) =>
    new Promise<Response>((resolve, reject) => {
      const u = new URL(input);
      const headers: Record<string, string> = {};
      new Headers(init.headers).forEach((v, k) => (headers[k] = v));
      const body = init.body as string | Uint8Array | null | undefined;
      if (body != null) headers["content-length"] = String(typeof body === "string" ? Buffer.byteLength(body) : body.byteLength);
      const req = http.request({ socketPath, method: init.method ?? "GET", path: u.pathname + u.search, headers }, (res) => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) {
          if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(", ") : v);
        }
        const status = res.statusCode ?? 500;
        const noBody = status === 204 || status === 304 || init.method === "HEAD";
        if (noBody) res.resume();
        resolve(new Response(noBody ? null : (Readable.toWeb(res) as ReadableStream), { status, headers: h }));
      });
      req.on("error", reject);
      init.signal?.addEventListener("abort", () => req.destroy(new Error("aborted")), { once: true });
      if (body != null) req.write(body);
      req.end();
    });
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | string[] | undefined>;
  body?: unknown;
  contentType?: string;
  accept?: string;
  signal?: AbortSignal;
}

/** Sends API requests to one server. */
export class Transport {
  readonly host: string;
  private readonly base: string;
  private readonly apiKey: string;
  private readonly fetch: Fetch;

  constructor(opts: ConnectionOptions = {}) {
    let host = opts.host ?? process.env.AIRLOCK_HOST ?? "";
    this.apiKey = opts.apiKey ?? process.env.AIRLOCK_API_KEY ?? "";
    if (!host) host = defaultSocket();
    this.host = host;
    if (host.startsWith("unix://") || host.startsWith("/")) {
      this.base = "http://airlock";
      this.fetch = opts.fetch ?? unixFetch(host.replace(/^unix:\/\//, ""));
    } else if (host.startsWith("http://") || host.startsWith("https://")) {
      this.base = host.replace(/\/+$/, "");
      this.fetch = opts.fetch ?? ((i, init) => fetch(i, init));
    } else {
      throw new InvalidError(`host ${JSON.stringify(host)}: want unix:///path, /path or http(s)://host:port`);
    }
  }

  /** The server's URL; on a unix socket a placeholder host only this transport's fetch reaches. */
  baseURL(): string {
    return this.base;
  }

  /** This transport's fetch, with its API key, for a URL of the server (a port route). */
  async fetchURL(url: string, init: RequestInit & { headers?: Record<string, string> } = {}): Promise<Response> {
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (this.apiKey && !headers.Authorization) headers.Authorization = `Bearer ${this.apiKey}`;
    return this.fetch(url, { ...init, headers });
  }

  private url(op: Operation, params: Record<string, string>, query?: RequestOptions["query"]): [string, string] {
    const [method, template] = ROUTES[op];
    let p: string = template;
    for (const [k, v] of Object.entries(params)) p = p.replace(`{${k}}`, encodeURIComponent(v));
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v === undefined) continue;
      for (const item of Array.isArray(v) ? v : [v]) q.append(k, String(item));
    }
    const qs = q.toString();
    return [method, this.base + p + (qs ? "?" + qs : "")];
  }

  /** Sends op and returns the 2xx response; other answers throw AirlockError. */
  async open(op: Operation, params: Record<string, string> = {}, o: RequestOptions = {}): Promise<Response> {
    const [method, url] = this.url(op, params, o.query);
    const headers: Record<string, string> = {};
    let body: string | Uint8Array | undefined;
    if (typeof o.body === "string" || o.body instanceof Uint8Array) {
      body = o.body;
      headers["content-type"] = o.contentType ?? "application/octet-stream";
    } else if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers["content-type"] = "application/json";
    }
    if (o.accept) headers["accept"] = o.accept;
    if (this.apiKey) headers["authorization"] = `Bearer ${this.apiKey}`;
    let resp: Response;
    try {
      resp = await this.fetch(url, { method, headers, body: body as BodyInit | undefined, signal: o.signal });
    } catch (e) {
      throw new AirlockError(`${method} ${url}: cannot reach airlock serve at ${this.host}: ${(e as Error).message}`);
    }
    if (resp.status < 200 || resp.status > 299) {
      const text = await resp.text();
      let code: string | undefined;
      let message = text.trim() || resp.statusText;
      try {
        const j = JSON.parse(text) as { error?: { code?: string; message?: string } };
        if (j.error?.code) {
          code = j.error.code;
          message = j.error.message ?? message;
        }
      } catch {
        // not JSON: keep the text
      }
      throw errorFor(resp.status, code, message);
    }
    return resp;
  }

  /** Sends op and decodes its JSON answer (undefined when it has none). */
  async call<T>(op: Operation, params: Record<string, string> = {}, o: RequestOptions = {}): Promise<T> {
    const resp = await this.open(op, params, o);
    const text = await resp.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** The NDJSON frames of a streamed answer. */
  async *frames(resp: Response): AsyncGenerator<Frame> {
    if (!resp.body) return;
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of resp.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (line) yield JSON.parse(line) as Frame;
      }
    }
    if (buf.trim()) yield JSON.parse(buf) as Frame;
  }
}
