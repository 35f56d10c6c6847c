/**
 * The /v1 API's JSON, typed. Interfaces are named after the OpenAPI
 * schemas and carry their field names; sdk/conformance_test.go checks both
 * against api/openapi.yaml.
 */

export interface CreateSandboxRequest {
  backend?: string;
  profile?: string;
  /** An inline policy (the YAML policy's fields), layered on the profile. */
  policy?: Record<string, unknown>;
  image?: string;
  /** Lifetime, a Go duration such as "30m". */
  timeout?: string;
  /** true: never expires; or the object form (KeepAliveSpec). */
  keep_alive?: boolean | KeepAliveSpec;
  labels?: Record<string, string>;
  env?: Record<string, string>;
  /** Named volumes of the tenant mounted into the sandbox. */
  volumes?: { name: string; path: string; read_only?: boolean }[];
  /** A request to the sandbox while it is paused or frozen resumes it first. */
  auto_resume?: boolean;
  /** Its ports answer anyone who knows its ID, without a key or token. */
  public_ports?: boolean;
  /** What its timeout does: destroy (the default) or pause (memory kept). */
  on_timeout?: "destroy" | "pause";
  /** Scopes whose access tokens the create's answer carries (SandboxInfo.access_tokens). */
  access_tokens?: ("sandbox" | "ports")[];
}

/**
 * keep_alive's object form: the sandbox does not expire while a background
 * process runs, then expires once idle for idle (default: the server's idle
 * timeout) and past its timeout.
 */
export interface KeepAliveSpec {
  while: "processes";
  /** A Go duration such as "30s". */
  idle?: string;
}

export interface PatchSandboxRequest {
  timeout?: string;
  keep_alive?: boolean;
}

export interface RequestRule {
  host: string;
  methods?: string[];
  path?: string;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  action?: "allow" | "deny";
  /** Programs inside the sandbox the rule is limited to (see docs/egress.md). */
  programs?: string[];
}

export interface NetworkRequest {
  mode: "none" | "allowlist" | "open";
  allow?: string[];
  deny?: string[];
  /** Replaces the HTTP request rules when present ([] removes them); absent keeps them. */
  requests?: RequestRule[];
}

export interface ExecRequest {
  args: string[];
  env?: Record<string, string>;
  dir?: string;
  timeout?: string;
  /** USER[:GROUP]: names from the sandbox's /etc/passwd, or uid:gid. */
  user?: string;
  /** The whole input, base64. */
  stdin?: string;
  background?: boolean;
  stdin_stream?: boolean;
  encoding?: "base64" | "text";
}

export interface CodeRequest {
  code: string;
  language?: "python" | "javascript";
  timeout?: string;
}

export interface SignalRequest {
  signal?: number;
}

export interface RenameRequest {
  from: string;
  to: string;
}

export interface MkdirRequest {
  path: string;
  mode?: number;
  parents?: boolean;
}

export interface PauseRequest {
  /** Freeze the processes in place, memory kept, while the server lives. */
  memory?: boolean;
}

export interface CheckpointRequest {
  name?: string;
}

export interface RollbackRequest {
  checkpoint: string;
}

export interface Stats {
  memory_peak_bytes: number;
  memory_bytes: number;
  pids: number;
  cpu_nanos: number;
  violations: number;
}

/** A sandbox as the server describes it. */
export interface SandboxInfo {
  id: string;
  backend: string;
  profile?: string;
  image?: string;
  state: "running" | "frozen" | "paused" | "stopped";
  reason?: string;
  labels?: Record<string, string>;
  keep_alive: boolean;
  pooled?: boolean;
  workdir?: string;
  memory_max_bytes?: number;
  created_at: string;
  expires_at?: string;
  ended_at?: string;
  policy?: Record<string, unknown>;
  stats?: Stats;
  /** "processes" for keep_alive {while: "processes"}. */
  keep_alive_while?: "processes";
  auto_resume?: boolean;
  public_ports?: boolean;
  on_timeout?: "destroy" | "pause";
  /** What the create added to every process's environment (GET of one sandbox only). */
  env?: Record<string, string>;
  /** How it runs, where its backend says more than its name (gvisor: runsc_version, platform). */
  runtime?: Record<string, string>;
  /**
   * A resumed sandbox's files matched the manifest its pause recorded
   * (false after a server crash: nothing was recorded).
   */
  verified?: boolean;
  /** The tokens of the scopes the create asked for (its answer only, never a get or a list). */
  access_tokens?: { sandbox: string; scope: "sandbox" | "ports"; token: string }[];
}

/**
 * A recorded state of a sandbox's workspace: a manifest of every file's
 * sha256 and mode, each distinct content stored once.
 */
export interface Checkpoint {
  id: string;
  sandbox: string;
  name?: string;
  created_at: string;
  files: number;
  /** The workspace's size: what counts against the tenant's checkpoint quota. */
  bytes: number;
  /** Content no earlier checkpoint of the sandbox had (what it stored). */
  new_bytes: number;
  /** Sockets, fifos and devices, not recorded. */
  skipped?: number;
  manifest_sha256: string;
}

export interface ExitStatus {
  exit_code: number;
  signal?: number;
  timed_out?: boolean;
  oom?: boolean;
  output_truncated?: boolean;
}

/** The buffered answer of an exec. */
export interface ExecResult extends ExitStatus {
  encoding: "base64" | "text";
  stdout: string;
  stderr: string;
  duration_ms: number;
}

/** How a command ended, with its output as text. */
export interface CommandResult extends ExitStatus {
  stdout: string;
  stderr: string;
}

/** A background process. */
export interface Process {
  id: string;
  pid: number;
  args: string[];
  running: boolean;
  exit?: ExitStatus;
  started_at: string;
  ended_at?: string;
  output_bytes: number;
}

export interface FileInfo {
  name: string;
  path: string;
  size: number;
  mode: number;
  mod_time: string;
  is_dir: boolean;
  link?: string;
  /** The owner as the sandbox sees it (absent where the backend does not know it). */
  uid?: number;
  gid?: number;
  /** Names of uid and gid in the sandbox's /etc/passwd and /etc/group. */
  owner?: string;
  group?: string;
  /** The file's metadata (extended attributes user.e2b.KEY), absent when none. */
  metadata?: Record<string, string>;
}

/** An exception a cell raised: its name, TimeoutError or KernelDied. */
export interface CodeError {
  name: string;
  value: string;
  traceback?: string;
}

export interface CodeImage {
  format: "png";
  /** base64 */
  data: string;
}

/** The outcome of a code cell. */
export interface CodeResult {
  language: string;
  stdout: string;
  stderr: string;
  /** The repr of the cell's last expression, when it has one. */
  result?: string;
  error?: CodeError;
  images?: CodeImage[];
  execution_count: number;
  output_truncated?: boolean;
  new_interpreter?: boolean;
  state_lost?: boolean;
  duration_ms: number;
}

export interface Event {
  seq: number;
  time: string;
  sandbox: string;
  type: string;
  message?: string;
  fields?: Record<string, unknown>;
}

/** One line of a streamed output (NDJSON). */
export interface Frame {
  type: "stdout" | "stderr" | "exit" | "error" | "dropped";
  data?: string;
  text?: string;
  offset: number;
  exit?: ExitStatus;
  error?: { code: string; message: string };
}

/** A minted port token and the URLs that carry it (POST .../port-tokens). */
export interface PortToken {
  port: number;
  token: string;
  /** The path-routed URL with the token (absolute, from Sandbox.portToken). */
  url: string;
  /** The host-routed URL, when the server has a preview domain. */
  preview_url?: string;
  expires_at: string;
}
