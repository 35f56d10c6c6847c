"""Typed views of the /v1 API's JSON.

Request bodies are TypedDicts named after their OpenAPI schemas; answers
are dataclasses with the schema's field names. sdk/conformance_test.go checks
both against api/openapi.yaml, so a field added to the API shows up here.
"""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, TypedDict, Union


# ---- request bodies ---------------------------------------------------------

# keep_alive's object form: the sandbox does not expire while a background
# process runs, then expires once idle for "idle" (a Go duration; default:
# the server's idle timeout) and past its timeout. "while" is a Python
# keyword: the functional form.
KeepAliveSpec = TypedDict("KeepAliveSpec", {"while": str, "idle": str}, total=False)


class CreateSandboxRequest(TypedDict, total=False):
    backend: str
    profile: str
    policy: Dict[str, Any]
    image: str
    timeout: str
    keep_alive: Union[bool, KeepAliveSpec]
    labels: Dict[str, str]
    env: Dict[str, str]
    volumes: List[Dict[str, Any]]
    auto_resume: bool
    public_ports: bool
    on_timeout: str
    access_tokens: List[str]  # scopes: "sandbox", "ports" (SandboxInfo.access_tokens)


class PatchSandboxRequest(TypedDict, total=False):
    timeout: str
    keep_alive: bool


class RequestRule(TypedDict, total=False):
    host: str
    methods: List[str]
    path: str
    query: Dict[str, str]
    headers: Dict[str, str]
    action: str
    programs: List[str]


class NetworkRequest(TypedDict, total=False):
    mode: str
    allow: List[str]
    deny: List[str]
    requests: List[RequestRule]


class ExecRequest(TypedDict, total=False):
    args: List[str]
    env: Dict[str, str]
    dir: str
    timeout: str
    user: str
    stdin: str
    background: bool
    stdin_stream: bool
    encoding: str


class CodeRequest(TypedDict, total=False):
    code: str
    language: str
    timeout: str


class SignalRequest(TypedDict, total=False):
    signal: int


# "from" is a Python keyword: the functional form.
RenameRequest = TypedDict("RenameRequest", {"from": str, "to": str}, total=False)


class MkdirRequest(TypedDict, total=False):
    path: str
    mode: int
    parents: bool


class PauseRequest(TypedDict, total=False):
    memory: bool


class CheckpointRequest(TypedDict, total=False):
    name: str


class RollbackRequest(TypedDict, total=False):
    checkpoint: str


# ---- answers ----------------------------------------------------------------

def _build(cls, data: Optional[Dict[str, Any]]):
    """Builds dataclass cls from JSON, ignoring fields it does not know."""
    if data is None:
        return None
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class Stats:
    memory_peak_bytes: int = 0
    memory_bytes: int = 0
    pids: int = 0
    cpu_nanos: int = 0
    violations: int = 0


@dataclass
class SandboxInfo:
    """A sandbox as the server describes it."""
    id: str = ""
    backend: str = ""
    profile: str = ""
    image: str = ""
    state: str = ""  # running, frozen, paused or stopped
    reason: str = ""
    labels: Dict[str, str] = field(default_factory=dict)
    keep_alive: bool = False
    pooled: bool = False
    workdir: str = ""
    memory_max_bytes: int = 0
    created_at: str = ""
    expires_at: str = ""
    ended_at: str = ""
    policy: Optional[Dict[str, Any]] = None
    stats: Optional[Stats] = None
    keep_alive_while: str = ""  # "processes" for keep_alive={"while": "processes"}
    auto_resume: bool = False
    public_ports: bool = False  # its ports answer without a key or token
    on_timeout: str = ""  # destroy (the default) or pause
    env: Dict[str, str] = field(default_factory=dict)  # what the create added (GET of one sandbox only)
    runtime: Dict[str, str] = field(default_factory=dict)  # how it runs, where the backend says more
    # A resumed sandbox's files matched the manifest its pause recorded
    # (False after a server crash: nothing was recorded).
    verified: bool = False
    # The tokens of the scopes the create asked for ({"sandbox", "scope",
    # "token"} each): its answer only, never a get or a list.
    access_tokens: List[Dict[str, str]] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "SandboxInfo":
        s = _build(cls, d)
        if isinstance(s.stats, dict):
            s.stats = _build(Stats, s.stats)
        s.labels = s.labels or {}
        return s


@dataclass
class Checkpoint:
    """A recorded state of a sandbox's workspace (the Checkpoint schema):
    a manifest of every file's sha256 and mode, each distinct content
    stored once."""
    id: str = ""
    sandbox: str = ""
    name: str = ""
    created_at: str = ""
    files: int = 0
    bytes: int = 0  # the workspace's size: what counts against the checkpoint quota
    new_bytes: int = 0  # content no earlier checkpoint of the sandbox had
    skipped: int = 0  # sockets, fifos and devices, not recorded
    manifest_sha256: str = ""


@dataclass
class ExitStatus:
    exit_code: int = 0
    signal: int = 0
    timed_out: bool = False
    oom: bool = False
    output_truncated: bool = False


@dataclass
class CommandResult:
    """How a command ended, with its output (the ExecResult schema)."""
    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    signal: int = 0
    timed_out: bool = False
    oom: bool = False
    output_truncated: bool = False
    encoding: str = "text"
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass
class ProcessInfo:
    """A background process (the Process schema)."""
    id: str = ""
    pid: int = 0
    args: List[str] = field(default_factory=list)
    running: bool = False
    exit: Optional[ExitStatus] = None
    started_at: str = ""
    ended_at: str = ""
    output_bytes: int = 0

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ProcessInfo":
        p = _build(cls, d)
        if isinstance(p.exit, dict):
            p.exit = _build(ExitStatus, p.exit)
        return p


@dataclass
class FileInfo:
    name: str = ""
    path: str = ""
    size: int = 0
    mode: int = 0
    mod_time: str = ""
    is_dir: bool = False
    link: str = ""
    # The owner as the sandbox sees it (None where the backend does not know it).
    uid: Optional[int] = None
    gid: Optional[int] = None
    owner: str = ""
    group: str = ""
    # The file's metadata (extended attributes user.e2b.KEY), None when none.
    metadata: Optional[Dict[str, str]] = None


@dataclass
class CodeError:
    """An exception a cell raised: name is the exception's, TimeoutError or KernelDied."""
    name: str = ""
    value: str = ""
    traceback: str = ""


@dataclass
class CodeImage:
    format: str = "png"
    data: str = ""  # base64, as on the wire

    @property
    def bytes(self) -> bytes:
        return base64.b64decode(self.data)

    def save(self, path: str) -> None:
        with open(path, "wb") as f:
            f.write(self.bytes)


@dataclass
class CodeResult:
    """The outcome of a code cell (the CodeResult schema)."""
    language: str = ""
    stdout: str = ""
    stderr: str = ""
    result: Optional[str] = None
    error: Optional[CodeError] = None
    images: List[CodeImage] = field(default_factory=list)
    execution_count: int = 0
    output_truncated: bool = False
    new_interpreter: bool = False
    state_lost: bool = False
    duration_ms: float = 0.0

    @property
    def text(self) -> Optional[str]:
        """The repr of the cell's last expression (None when it has none)."""
        return self.result

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "CodeResult":
        r = _build(cls, d)
        if isinstance(r.error, dict):
            r.error = _build(CodeError, r.error)
        r.images = [_build(CodeImage, i) for i in (r.images or [])]
        return r


@dataclass
class Event:
    seq: int = 0
    time: str = ""
    sandbox: str = ""
    type: str = ""
    message: str = ""
    fields: Dict[str, Any] = field(default_factory=dict)
