/** Sandboxes, their commands and files, and the code interpreter. */
import { promises as fsp } from "node:fs";
import * as path from "node:path";

import { AirlockError, CommandExitError, ConflictError, errorFor, InvalidError, NotFoundError } from "./errors.js";
import { pack, unpack, type TarEntry } from "./tar.js";
import { Transport, type ConnectionOptions } from "./transport.js";
import type {
  Checkpoint, CodeResult, CommandResult, CreateSandboxRequest, Event, ExecRequest, ExecResult, ExitStatus,
  FileInfo, NetworkRequest, PortToken, Process, SandboxInfo,
} from "./types.js";

/** Seconds (a number) or a Go duration string such as "90s" or "10m". */
export type Duration = number | string;
export type OutputCallback = (text: string) => void;

function duration(d: Duration | undefined): string | undefined {
  if (d === undefined) return undefined;
  if (typeof d === "string") return d;
  if (!(d >= 0)) throw new InvalidError(`duration ${d}: want a non-negative number of seconds`);
  return `${d}s`;
}

const b64 = (b: Uint8Array | string) => Buffer.from(b).toString("base64");

/** Decodes a stream's chunks as UTF-8, keeps the text, calls back. */
class Collector {
  private readonly decoder = new TextDecoder();
  private readonly parts: string[] = [];
  constructor(private readonly cb?: OutputCallback) {}
  feed(data: Uint8Array, final = false): void {
    const text = this.decoder.decode(data, { stream: !final });
    if (text) {
      this.parts.push(text);
      this.cb?.(text);
    }
  }
  text(): string {
    this.feed(new Uint8Array(), true);
    return this.parts.join("");
  }
}

async function follow(t: Transport, resp: Response, out: Collector, err: Collector): Promise<ExitStatus> {
  for await (const f of t.frames(resp)) {
    if (f.type === "stdout" || f.type === "stderr") {
      const data = f.data ? Buffer.from(f.data, "base64") : Buffer.from(f.text ?? "");
      (f.type === "stdout" ? out : err).feed(data);
    } else if (f.type === "exit") {
      return f.exit ?? { exit_code: 0 };
    } else if (f.type === "error") {
      throw errorFor(0, f.error?.code, f.error?.message ?? "the command failed");
    }
  }
  throw new AirlockError("the output stream ended before the command did");
}

function result(status: ExitStatus, out: Collector, err: Collector): CommandResult {
  return { ...status, exit_code: status.exit_code ?? 0, stdout: out.text(), stderr: err.text() };
}

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string>;
  /** Run as USER[:GROUP]: names from the sandbox's /etc/passwd, or uid:gid. */
  user?: string;
  /** Kill the command after this long. */
  timeout?: Duration;
  /** The whole input; or true (with background) to stream it with sendStdin. */
  stdin?: string | Uint8Array | true;
  /** Called with output text as it comes. */
  onStdout?: OutputCallback;
  onStderr?: OutputCallback;
  /** Throw CommandExitError on a non-zero exit code. */
  check?: boolean;
  signal?: AbortSignal;
}

/** A command running in the background. */
export class CommandHandle {
  constructor(private readonly sb: Sandbox, public info: Process) {}
  /** The server's handle of the process (p1, p2, ...). */
  get id(): string { return this.info.id; }
  /** The process ID inside the sandbox. */
  get pid(): number { return this.info.pid; }
  private params() { return { id: this.sb.id, pid: this.info.id }; }

  /** Fetches the process's current state. */
  async refresh(): Promise<Process> {
    this.info = await this.sb.transport.call<Process>("getProcess", this.params());
    return this.info;
  }

  /** Follows the output (from the start of what the server kept) until the process exits. */
  async wait(o: { onStdout?: OutputCallback; onStderr?: OutputCallback; signal?: AbortSignal } = {}): Promise<CommandResult> {
    const out = new Collector(o.onStdout);
    const err = new Collector(o.onStderr);
    const resp = await this.sb.transport.open("processOutput", this.params(), { query: { follow: true }, signal: o.signal });
    return result(await follow(this.sb.transport, resp, out, err), out, err);
  }

  /** Writes to the process's stdin (started with stdin: true); eof closes it afterwards. */
  async sendStdin(data: string | Uint8Array, eof = true): Promise<void> {
    await this.sb.transport.call("processStdin", this.params(), { query: { eof }, body: typeof data === "string" ? new TextEncoder().encode(data) : data });
  }

  /** Sends a signal (a Linux signal number). */
  async signal(sig: number): Promise<void> {
    await this.sb.transport.call("signalProcess", this.params(), { body: { signal: sig } });
  }

  /** Kills the process (SIGKILL); its output stays readable. */
  async kill(): Promise<void> {
    try {
      await this.signal(9);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e; // already exited
    }
  }

  /** Kills the process if it runs and drops it from the server. */
  async forget(): Promise<void> {
    await this.sb.transport.call("deleteProcess", this.params());
  }
}

/** Runs commands in a sandbox: sandbox.commands. */
export class Commands {
  constructor(private readonly sb: Sandbox) {}

  /**
   * Runs cmd (a shell command line, run with /bin/sh -c, or an argv array)
   * and resolves with its result once it ends; with background: true it
   * resolves at once with a CommandHandle.
   */
  run(cmd: string | string[], opts: RunOptions & { background: true }): Promise<CommandHandle>;
  run(cmd: string | string[], opts?: RunOptions & { background?: false }): Promise<CommandResult>;
  async run(cmd: string | string[], opts: RunOptions & { background?: boolean } = {}): Promise<CommandResult | CommandHandle> {
    const req: ExecRequest = { args: typeof cmd === "string" ? ["/bin/sh", "-c", cmd] : [...cmd] };
    if (opts.env) req.env = opts.env;
    if (opts.cwd) req.dir = opts.cwd;
    if (opts.user) req.user = opts.user;
    if (opts.timeout !== undefined) req.timeout = duration(opts.timeout);
    if (typeof opts.stdin === "string" || opts.stdin instanceof Uint8Array) req.stdin = b64(opts.stdin);
    const t = this.sb.transport;
    const params = { id: this.sb.id };
    if (opts.background) {
      req.background = true;
      if (opts.stdin === true) req.stdin_stream = true;
      return new CommandHandle(this.sb, await t.call<Process>("exec", params, { body: req, signal: opts.signal }));
    }
    if (opts.stdin === true) throw new InvalidError("stdin: true streams input to a background command: pass background: true");
    const out = new Collector(opts.onStdout);
    const err = new Collector(opts.onStderr);
    let res: CommandResult;
    if (!opts.onStdout && !opts.onStderr) {
      req.encoding = "base64";
      const r = await t.call<ExecResult>("exec", params, { body: req, signal: opts.signal });
      out.feed(Buffer.from(r.stdout, "base64"));
      err.feed(Buffer.from(r.stderr, "base64"));
      const { stdout: _o, stderr: _e, encoding: _enc, duration_ms: _d, ...status } = r;
      res = result(status, out, err);
    } else {
      const resp = await t.open("exec", params, { body: req, accept: "application/x-ndjson", signal: opts.signal });
      res = result(await follow(t, resp, out, err), out, err);
    }
    if (opts.check && res.exit_code !== 0) throw new CommandExitError(res);
    return res;
  }

  /** The sandbox's background processes (running and recently ended). */
  async list(): Promise<Process[]> {
    return (await this.sb.transport.call<{ processes: Process[] }>("listProcesses", { id: this.sb.id })).processes;
  }

  /** A handle of background process processId (p1, ...). */
  async connect(processId: string): Promise<CommandHandle> {
    return new CommandHandle(this.sb, await this.sb.transport.call<Process>("getProcess", { id: this.sb.id, pid: processId }));
  }

  /** Waits until background process processId exits (TimeoutError after timeout). */
  async wait(processId: string, timeout?: Duration): Promise<Process> {
    return this.sb.transport.call<Process>("waitProcess", { id: this.sb.id, pid: processId }, { query: { timeout: duration(timeout) } });
  }
}

/**
 * path, if absolute inside the sandbox; a relative one is refused here,
 * before any request, naming it (the server has no working directory to
 * resolve it against).
 */
function absolute(path: string): string {
  if (typeof path !== "string" || !path.startsWith("/")) {
    throw new InvalidError(`path ${JSON.stringify(path)}: must be absolute inside the sandbox (e.g. "/workspace/${path}"); relative paths are not resolved`);
  }
  return path;
}

/** Reads and writes files in a sandbox: sandbox.files. Paths are absolute inside the sandbox. */
export class Files {
  constructor(private readonly sb: Sandbox) {}

  /** The file's content as text (UTF-8), or bytes with format: "bytes". */
  read(path: string, opts?: { format?: "text" }): Promise<string>;
  read(path: string, opts: { format: "bytes" }): Promise<Uint8Array>;
  async read(path: string, opts: { format?: "text" | "bytes" } = {}): Promise<string | Uint8Array> {
    const resp = await this.sb.transport.open("readFile", { id: this.sb.id }, { query: { path: absolute(path) } });
    const buf = new Uint8Array(await resp.arrayBuffer());
    if (opts.format === "bytes") return buf;
    return new TextDecoder().decode(buf);
  }

  /** Writes data to path (atomically), creating parent directories unless mkdirs is false. */
  async write(path: string, data: string | Uint8Array, opts: { mode?: number; mkdirs?: boolean } = {}): Promise<{ path: string; bytes: number }> {
    const body = typeof data === "string" ? new TextEncoder().encode(data) : data;
    return this.sb.transport.call("writeFile", { id: this.sb.id }, {
      query: { path: absolute(path), mkdirs: opts.mkdirs ?? true, mode: opts.mode === undefined ? undefined : opts.mode.toString(8) },
      body,
    });
  }

  /** The entries of directory path. */
  async list(path: string): Promise<FileInfo[]> {
    return (await this.sb.transport.call<{ files: FileInfo[] }>("listFiles", { id: this.sb.id }, { query: { path: absolute(path) } })).files;
  }

  /** Describes path (a symlink is not followed). */
  async stat(path: string): Promise<FileInfo> {
    return this.sb.transport.call<FileInfo>("statFile", { id: this.sb.id }, { query: { path: absolute(path) } });
  }

  async exists(path: string): Promise<boolean> {
    try {
      await this.stat(path);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  async remove(path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    await this.sb.transport.call("removeFile", { id: this.sb.id }, { query: { path: absolute(path), recursive: opts.recursive ?? false } });
  }

  async rename(from: string, to: string): Promise<void> {
    await this.sb.transport.call("renameFile", { id: this.sb.id }, { body: { from: absolute(from), to: absolute(to) } });
  }

  async makeDir(path: string, opts: { parents?: boolean; mode?: number } = {}): Promise<void> {
    const parents = opts.parents ?? true;
    try {
      await this.sb.transport.call("makeDir", { id: this.sb.id }, { body: { path: absolute(path), parents, mode: opts.mode } });
    } catch (e) {
      if (!(e instanceof ConflictError && parents)) throw e;
    }
  }

  /** Copies a local file or directory tree to remotePath. */
  async upload(localPath: string, remotePath: string): Promise<void> {
    absolute(remotePath); // before reading the local tree
    const st = await fsp.stat(localPath);
    if (!st.isDirectory()) {
      await this.write(remotePath, await fsp.readFile(localPath));
      return;
    }
    const entries: TarEntry[] = [];
    const walk = async (dir: string, rel: string) => {
      for (const d of (await fsp.readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
        const name = rel ? `${rel}/${d.name}` : d.name;
        const full = path.join(dir, d.name);
        if (d.isDirectory()) {
          entries.push({ name, dir: true, mode: 0o755 });
          await walk(full, name);
        } else if (d.isFile()) {
          entries.push({ name, dir: false, mode: (await fsp.stat(full)).mode & 0o777, data: await fsp.readFile(full) });
        } // links and specials are not sent: the server accepts files and directories only
      }
    };
    await walk(localPath, "");
    await this.sb.transport.call("uploadArchive", { id: this.sb.id }, { query: { path: absolute(remotePath) }, body: pack(entries), contentType: "application/x-tar" });
  }

  /**
   * Copies a remote file or directory tree to localPath. Entries that would
   * land outside localPath, links and devices are refused or skipped: what
   * comes out of a sandbox is untrusted.
   */
  async download(remotePath: string, localPath: string): Promise<void> {
    if (!(await this.stat(remotePath)).is_dir) {
      await fsp.writeFile(localPath, await this.read(remotePath, { format: "bytes" }));
      return;
    }
    const resp = await this.sb.transport.open("downloadArchive", { id: this.sb.id }, { query: { path: absolute(remotePath) } });
    const entries = unpack(new Uint8Array(await resp.arrayBuffer()));
    const root = path.resolve(localPath);
    await fsp.mkdir(root, { recursive: true });
    for (const e of entries) {
      // Entries are named under the tree's base name: strip it.
      const rel = path.posix.normalize(e.name).split("/").slice(1).join("/");
      if (!rel || rel === ".") continue;
      const target = path.resolve(root, rel);
      if (!target.startsWith(root + path.sep)) throw new InvalidError(`archive entry ${JSON.stringify(e.name)}: outside the destination`);
      if (e.dir) await fsp.mkdir(target, { recursive: true });
      else {
        await fsp.mkdir(path.dirname(target), { recursive: true });
        await fsp.writeFile(target, e.data ?? new Uint8Array(), { mode: e.mode & 0o755 });
      }
    }
  }
}

export interface CreateOptions extends ConnectionOptions {
  profile?: string;
  backend?: string;
  /** An inline policy (the YAML policy's fields), layered on profile. */
  policy?: Record<string, unknown>;
  image?: string;
  /** Lifetime. */
  timeout?: Duration;
  /**
   * true: never expires. { while: "processes", idle: 30 }: does not expire
   * while a background process runs, then expires once idle that long
   * (default: the server's idle timeout) and past its timeout.
   */
  keepAlive?: boolean | { while: "processes"; idle?: Duration };
  /** A request to the sandbox while it is paused or frozen resumes it first. */
  autoResume?: boolean;
  /** Its ports answer anyone who knows its ID, without a key or token. */
  publicPorts?: boolean;
  /** What its timeout does: "destroy" (the default) or "pause" (memory kept). */
  onTimeout?: "destroy" | "pause";
  labels?: Record<string, string>;
  /** Added to every process's environment. */
  env?: Record<string, string>;
  /** Named volumes to mount: [{name, path, read_only}]. */
  volumes?: { name: string; path: string; read_only?: boolean }[];
}

/**
 * A sandbox of `airlock serve`. Create one with Sandbox.create(); destroy
 * it with kill(), or let `await using` (or withSandbox) do it.
 */
export class Sandbox {
  readonly commands: Commands;
  readonly files: Files;

  private workdirValue: string;

  constructor(public readonly transport: Transport, private infoValue: SandboxInfo) {
    this.workdirValue = infoValue.workdir ?? "";
    this.commands = new Commands(this);
    this.files = new Files(this);
  }

  /** Creates a sandbox. */
  static async create(opts: CreateOptions = {}): Promise<Sandbox> {
    const t = new Transport(opts);
    const body: CreateSandboxRequest = {};
    if (opts.profile) body.profile = opts.profile;
    if (opts.backend) body.backend = opts.backend;
    if (opts.policy) body.policy = opts.policy;
    if (opts.image) body.image = opts.image;
    if (opts.timeout !== undefined) body.timeout = duration(opts.timeout);
    if (typeof opts.keepAlive === "object") body.keep_alive = { while: opts.keepAlive.while, idle: duration(opts.keepAlive.idle) };
    else if (opts.keepAlive) body.keep_alive = true;
    if (opts.autoResume) body.auto_resume = true;
    if (opts.publicPorts) body.public_ports = true;
    if (opts.onTimeout) body.on_timeout = opts.onTimeout;
    if (opts.labels) body.labels = opts.labels;
    if (opts.env) body.env = opts.env;
    if (opts.volumes) body.volumes = opts.volumes;
    return new Sandbox(t, await t.call<SandboxInfo>("createSandbox", {}, { body }));
  }

  /** Attaches to an existing sandbox. */
  static async connect(id: string, opts: ConnectionOptions = {}): Promise<Sandbox> {
    const t = new Transport(opts);
    return new Sandbox(t, await t.call<SandboxInfo>("getSandbox", { id }));
  }

  /** The caller's sandboxes (running ones unless all). */
  static async list(opts: ConnectionOptions & { labels?: Record<string, string>; all?: boolean } = {}): Promise<SandboxInfo[]> {
    const label = Object.entries(opts.labels ?? {}).map(([k, v]) => `${k}=${v}`);
    const r = await new Transport(opts).call<{ sandboxes: SandboxInfo[] }>("listSandboxes", {}, { query: { label, all: opts.all || undefined } });
    return r.sandboxes;
  }

  /** The server's health and backend probes. */
  static async health(opts: ConnectionOptions = {}): Promise<{ status: string; backends: Record<string, unknown> }> {
    return new Transport(opts).call("health");
  }

  get id(): string { return this.infoValue.id; }
  /** The default working directory (and $HOME) inside the sandbox. */
  get workdir(): string { return this.workdirValue; }

  /** Fetches the sandbox's current description (with resource use). */
  async info(): Promise<SandboxInfo> {
    return this.remember(await this.transport.call<SandboxInfo>("getSandbox", { id: this.id }));
  }

  /**
   * Keeps info as the sandbox's description. A paused or stopped sandbox's
   * has no workdir, which a pause does not change: the last one known stays.
   */
  private remember(info: SandboxInfo): SandboxInfo {
    this.infoValue = info;
    this.workdirValue = info.workdir || this.workdirValue;
    return info;
  }

  /** Makes the sandbox expire timeout from now. */
  async setTimeout(timeout: Duration): Promise<SandboxInfo> {
    return this.transport.call("patchSandbox", { id: this.id }, { body: { timeout: duration(timeout) } });
  }

  /** Turns expiry off (or back on). */
  async keepAlive(keep = true): Promise<SandboxInfo> {
    return this.transport.call("patchSandbox", { id: this.id }, { body: { keep_alive: keep } });
  }

  /** Replaces the sandbox's egress rules (audited; only from outside). */
  async setNetwork(rules: NetworkRequest): Promise<void> {
    await this.transport.call("setNetwork", { id: this.id }, { body: rules });
  }

  /**
   * Pauses the sandbox: its processes end, its files, checkpoints and
   * record are kept (state "paused", which survives a server restart) and
   * resume() starts it again on the same files, same ID. Background
   * processes and interpreter state do not survive it. Pausing a paused
   * sandbox is a no-op.
   *
   * With memory: true its processes are frozen in place instead, memory
   * kept, while the server lives (state "frozen"); requests to it then
   * reject with ConflictError until resume(), unless it was created with
   * autoResume.
   *
   * Native sandboxes without an image whose workspace is a disk volume
   * (policy limits.disk) or in the server's data directory can be paused;
   * others reject with NotSupportedError saying why.
   */
  async pause(opts: { memory?: boolean } = {}): Promise<SandboxInfo> {
    const body = opts.memory ? { memory: true } : undefined;
    return this.remember(await this.transport.call<SandboxInfo>("pause", { id: this.id }, { body }));
  }

  /**
   * Starts a paused sandbox again on its files (same ID), or thaws a frozen
   * one; a running one resolves as it is. Files changed while it was paused
   * reject with CorruptError naming the file, and it stays paused. The
   * answer's verified says its files matched the manifest its pause
   * recorded (false after a server crash).
   */
  async resume(): Promise<SandboxInfo> {
    return this.remember(await this.transport.call<SandboxInfo>("resume", { id: this.id }));
  }

  /**
   * Records the sandbox's workspace (every file's content, mode and owner;
   * each distinct content stored once) and resolves with the checkpoint,
   * whose id rollback() takes. name is a label of yours (at most 128
   * bytes). A tenant's checkpoints are bounded in count and bytes: beyond,
   * LimitExceededError.
   */
  async checkpoint(name?: string): Promise<Checkpoint> {
    return this.transport.call<Checkpoint>("createCheckpoint", { id: this.id }, { body: name ? { name } : undefined });
  }

  /** The sandbox's checkpoints, oldest first. */
  async checkpoints(): Promise<Checkpoint[]> {
    return (await this.transport.call<{ checkpoints: Checkpoint[] | null }>("listCheckpoints", { id: this.id })).checkpoints ?? [];
  }

  /** Deletes a checkpoint (its ID, or the Checkpoint); content another checkpoint shares is kept. */
  async deleteCheckpoint(checkpoint: string | Checkpoint): Promise<void> {
    await this.transport.call("deleteCheckpoint", { id: this.id, checkpoint: checkpointId(checkpoint) });
  }

  /**
   * Restores the workspace to checkpoint (its ID, or the Checkpoint) in
   * place: same ID, its processes restarted. Every stored file is checked
   * against the checkpoint's manifest first: a changed or missing one
   * rejects with CorruptError naming it, and the sandbox is left as it was.
   */
  async rollback(checkpoint: string | Checkpoint): Promise<SandboxInfo> {
    const body = { checkpoint: checkpointId(checkpoint) };
    return this.remember(await this.transport.call<SandboxInfo>("rollback", { id: this.id }, { body }));
  }

  /**
   * Runs code as the next cell of the sandbox's interpreter for language
   * (python by default, or javascript), which keeps its state between
   * calls. A cell that raises resolves with .error set; matplotlib figures
   * come back in .images as PNG (base64).
   */
  async runCode(code: string, opts: { language?: "python" | "javascript"; timeout?: Duration; signal?: AbortSignal } = {}): Promise<CodeResult> {
    return this.transport.call<CodeResult>("runCode", { id: this.id }, {
      body: { code, language: opts.language ?? "python", timeout: duration(opts.timeout) },
      signal: opts.signal,
    });
  }

  /**
   * Opens url in the sandbox's headless browser (Chromium inside the
   * sandbox, started on first use; the image must have it) and resolves
   * with the page's url and title once it loaded.
   */
  async browserNavigate(url: string, opts: { width?: number; height?: number; signal?: AbortSignal } = {}): Promise<{ url: string; title: string }> {
    const r = await this.transport.call<{ url: string; title: string }>("browserNavigate", { id: this.id }, {
      body: { url, width: opts.width, height: opts.height },
      signal: opts.signal,
    });
    return { url: r.url, title: r.title };
  }

  /** A PNG of the sandbox browser's page, after opening opts.url first when given. */
  async browserScreenshot(opts: { url?: string; fullPage?: boolean; signal?: AbortSignal } = {}): Promise<Buffer> {
    const r = await this.transport.call<{ data: string }>("browserScreenshot", { id: this.id }, {
      body: { url: opts.url, full_page: opts.fullPage ?? false },
      signal: opts.signal,
    });
    return Buffer.from(r.data, "base64");
  }

  /**
   * The URL of port inside the sandbox: HTTP and WebSocket requests to it (and below it)
   * reach 127.0.0.1:port in the sandbox, with this client's API key (transport.fetchURL sends
   * them so, over the unix socket too). For a browser, use portToken(port).url.
   */
  url(port: number): string {
    return `${this.transport.baseURL()}/v1/sandboxes/${encodeURIComponent(this.id)}/ports/${Math.trunc(port)}/`;
  }

  /** Mints a token that lets its holder reach port without an API key until it expires (ttl: "90s", seconds, default 15m). */
  async portToken(port: number, opts: { ttl?: Duration } = {}): Promise<PortToken> {
    const r = await this.transport.call<PortToken>("portToken", { id: this.id }, {
      body: { port, ttl: opts.ttl === undefined ? undefined : duration(opts.ttl) },
    });
    return { ...r, url: this.transport.baseURL() + r.url };
  }

  /**
   * The sandbox's access token of scope ("sandbox": its in-sandbox routes, never its lifecycle;
   * "ports": its ports only): a Bearer credential for this one sandbox, worth nothing once it is gone.
   */
  async accessToken(scope: "sandbox" | "ports" = "sandbox"): Promise<string> {
    return (await this.transport.call<{ token: string }>("accessToken", { id: this.id }, { body: { scope } })).token;
  }

  /** The sandbox's audit events after sequence number after. */
  async events(after = 0): Promise<Event[]> {
    return (await this.transport.call<{ events: Event[] }>("events", { id: this.id }, { query: { after } })).events;
  }

  /** Destroys the sandbox and everything in it. Idempotent. */
  async kill(): Promise<void> {
    try {
      await this.transport.call("deleteSandbox", { id: this.id });
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.kill();
  }
}

function checkpointId(cp: string | Checkpoint): string {
  const id = typeof cp === "string" ? cp : cp.id;
  if (!id) throw new InvalidError("checkpoint: want a checkpoint ID (cp-...) or a Checkpoint");
  return id;
}

/** Creates a sandbox, runs fn with it and destroys it afterwards, whatever happens. */
export async function withSandbox<T>(opts: CreateOptions, fn: (sb: Sandbox) => Promise<T>): Promise<T> {
  const sb = await Sandbox.create(opts);
  try {
    return await fn(sb);
  } finally {
    await sb.kill();
  }
}
