"""Sandboxes, their commands and files, and the code interpreter."""

from __future__ import annotations

import base64
import codecs
import io
import os
import posixpath
import tarfile
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import errors
from ._transport import Transport
from .types import (Checkpoint, CodeResult, CommandResult, Event, ExecRequest, FileInfo,
                    ProcessInfo, SandboxInfo, _build)

Duration = Union[int, float, str]
OutputCallback = Callable[[str], Any]


def _duration(d: Optional[Duration]) -> Optional[str]:
    """A Go duration string from seconds (a number) or a string like "30s"."""
    if d is None:
        return None
    if isinstance(d, str):
        return d
    if d < 0:
        raise errors.InvalidError(f"duration {d}: want a non-negative number of seconds")
    return f"{d:g}s" if isinstance(d, float) else f"{d}s"


class _Collector:
    """Decodes a stream's chunks as UTF-8 (split characters kept whole),
    keeps the text and hands each piece to an optional callback."""

    def __init__(self, callback: Optional[OutputCallback]) -> None:
        self.callback = callback
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.parts: List[str] = []

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self.decoder.decode(data, final)
        if text:
            self.parts.append(text)
            if self.callback is not None:
                self.callback(text)

    def text(self) -> str:
        self.feed(b"", final=True)
        return "".join(self.parts)


def _follow(transport: Transport, resp, out: _Collector, err: _Collector) -> Dict[str, Any]:
    """Reads NDJSON frames into out/err until the exit frame; returns its status."""
    for f in transport.frames(resp):
        kind = f.get("type")
        if kind in ("stdout", "stderr"):
            data = base64.b64decode(f["data"]) if f.get("data") else f.get("text", "").encode()
            (out if kind == "stdout" else err).feed(data)
        elif kind == "exit":
            return f.get("exit") or {}
        elif kind == "error":
            e = f.get("error") or {}
            raise errors.from_answer(0, e.get("code"), e.get("message", "the command failed"))
    raise errors.AirlockError("the output stream ended before the command did")


def _result(status: Mapping[str, Any], out: _Collector, err: _Collector) -> CommandResult:
    return CommandResult(exit_code=status.get("exit_code", 0), signal=status.get("signal", 0),
                         timed_out=status.get("timed_out", False), oom=status.get("oom", False),
                         output_truncated=status.get("output_truncated", False),
                         stdout=out.text(), stderr=err.text())


class CommandHandle:
    """A command running in the background (commands.run(..., background=True))."""

    def __init__(self, sandbox: "Sandbox", info: ProcessInfo) -> None:
        self._sb = sandbox
        self.info = info

    @property
    def id(self) -> str:
        """The server's handle of the process (p1, p2, ...)."""
        return self.info.id

    @property
    def pid(self) -> int:
        """The process ID inside the sandbox."""
        return self.info.pid

    def _params(self) -> Dict[str, str]:
        return {"id": self._sb.id, "pid": self.info.id}

    def refresh(self) -> ProcessInfo:
        """Fetches the process's current state."""
        self.info = ProcessInfo.from_json(self._sb._t.call("get_process", self._params()))
        return self.info

    def wait(self, on_stdout: Optional[OutputCallback] = None, on_stderr: Optional[OutputCallback] = None) -> CommandResult:
        """Follows the process's output (from the start of what the server
        kept) until it exits, calling the callbacks as output comes."""
        out, err = _Collector(on_stdout), _Collector(on_stderr)
        resp = self._sb._t.open("process_output", self._params(), query={"follow": True}, timeout=None)
        status = _follow(self._sb._t, resp, out, err)
        return _result(status, out, err)

    def send_stdin(self, data: Union[str, bytes], eof: bool = True) -> None:
        """Writes data to the process's stdin (it must have been started
        with stdin=True); eof closes stdin afterwards."""
        if isinstance(data, str):
            data = data.encode()
        self._sb._t.call("process_stdin", self._params(), query={"eof": eof}, body=data)

    def signal(self, signal: int) -> None:
        """Sends a signal (a Linux signal number)."""
        self._sb._t.call("signal_process", self._params(), body={"signal": signal})

    def kill(self) -> None:
        """Kills the process (SIGKILL); its output stays readable."""
        try:
            self.signal(9)
        except errors.NotFoundError:
            pass  # already exited

    def forget(self) -> None:
        """Kills the process if it runs and drops it from the server."""
        self._sb._t.call("delete_process", self._params())


class Commands:
    """Runs commands in a sandbox: sandbox.commands."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def run(self, cmd: Union[str, Sequence[str]], *, background: bool = False, cwd: Optional[str] = None,
            env: Optional[Mapping[str, str]] = None, timeout: Optional[Duration] = None, user: Optional[str] = None,
            stdin: Union[None, bool, str, bytes] = None, on_stdout: Optional[OutputCallback] = None,
            on_stderr: Optional[OutputCallback] = None, check: bool = False) -> Any:
        """Runs cmd and returns a CommandResult once it ends.

        cmd is a shell command line (run with /bin/sh -c) or an argv list.
        on_stdout/on_stderr receive output as it comes (text). With
        background=True the call returns a CommandHandle at once; pass
        stdin=True to stream its input later with send_stdin. With
        check=True a non-zero exit raises CommandExitError. user runs it
        as USER[:GROUP] (names from the sandbox's /etc/passwd, or uid:gid).
        """
        args = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        req: ExecRequest = {"args": args}
        if env:
            req["env"] = dict(env)
        if cwd:
            req["dir"] = cwd
        if user:
            req["user"] = user
        if timeout is not None:
            req["timeout"] = _duration(timeout) or ""
        if isinstance(stdin, (str, bytes)):
            req["stdin"] = base64.b64encode(stdin.encode() if isinstance(stdin, str) else stdin).decode()
        t = self._sb._t
        params = {"id": self._sb.id}
        if background:
            req["background"] = True
            if stdin is True:
                req["stdin_stream"] = True
            return CommandHandle(self._sb, ProcessInfo.from_json(t.call("exec", params, body=req)))
        if stdin is True:
            raise errors.InvalidError("stdin=True streams input to a background command: pass background=True")
        out, err = _Collector(on_stdout), _Collector(on_stderr)
        if on_stdout is None and on_stderr is None:
            req["encoding"] = "base64"
            r = t.call("exec", params, body=req, timeout=None)
            out.feed(base64.b64decode(r.get("stdout", "")))
            err.feed(base64.b64decode(r.get("stderr", "")))
            res = _result(r, out, err)
            res.duration_ms = r.get("duration_ms", 0.0)
        else:
            resp = t.open("exec", params, body=req, accept="application/x-ndjson", timeout=None)
            res = _result(_follow(t, resp, out, err), out, err)
        if check and res.exit_code != 0:
            raise errors.CommandExitError(res)
        return res

    def list(self) -> List[ProcessInfo]:
        """The sandbox's background processes (running and recently ended)."""
        r = self._sb._t.call("list_processes", {"id": self._sb.id})
        return [ProcessInfo.from_json(p) for p in r.get("processes", [])]

    def connect(self, process_id: str) -> CommandHandle:
        """A handle of background process process_id (p1, ...)."""
        return CommandHandle(self._sb, ProcessInfo.from_json(self._sb._t.call("get_process", {"id": self._sb.id, "pid": process_id})))

    def wait(self, process_id: str, timeout: Optional[Duration] = None) -> ProcessInfo:
        """Waits until background process process_id exits (TimeoutError after timeout)."""
        q = {"timeout": _duration(timeout)} if timeout is not None else None
        return ProcessInfo.from_json(self._sb._t.call("wait_process", {"id": self._sb.id, "pid": process_id}, query=q, timeout=None))



def _absolute(path: str) -> str:
    """path, if absolute inside the sandbox; a relative one is refused here,
    before any request, naming it (the server has no working directory to
    resolve it against)."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise errors.InvalidError(
            f"path {path!r}: must be absolute inside the sandbox (e.g. '/workspace/{path}'); relative paths are not resolved")
    return path

class Files:
    """Reads and writes files in a sandbox: sandbox.files. Paths are
    absolute paths inside the sandbox."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def _q(self, path: str, **kw: Any) -> Dict[str, Any]:
        return {"path": _absolute(path), **kw}

    def read(self, path: str, format: str = "text") -> Union[str, bytes]:
        """The file's content: text (UTF-8) by default, bytes with format="bytes"."""
        resp = self._sb._t.open("read_file", {"id": self._sb.id}, query=self._q(path), timeout=None)
        try:
            data = resp.read()
        finally:
            resp.close()
        if format == "bytes":
            return data
        if format == "text":
            return data.decode("utf-8", "replace")
        raise errors.InvalidError(f"format {format!r}: want text or bytes")

    def write(self, path: str, data: Union[str, bytes, io.IOBase], mode: Optional[int] = None, mkdirs: bool = True) -> Dict[str, Any]:
        """Writes data (text, bytes or a binary file object) to path, creating
        parent directories unless mkdirs=False. The write is atomic."""
        if isinstance(data, str):
            data = data.encode()
        q = self._q(path, mkdirs=mkdirs)
        if mode is not None:
            q["mode"] = format(mode, "o")
        return self._sb._t.call("write_file", {"id": self._sb.id}, query=q, body=data, timeout=None)

    def list(self, path: str) -> List[FileInfo]:
        """The entries of directory path."""
        r = self._sb._t.call("list_files", {"id": self._sb.id}, query=self._q(path))
        return [_build(FileInfo, f) for f in r.get("files", [])]

    def stat(self, path: str) -> FileInfo:
        """Describes path (a symlink is not followed)."""
        return _build(FileInfo, self._sb._t.call("stat_file", {"id": self._sb.id}, query=self._q(path)))

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except errors.NotFoundError:
            return False

    def remove(self, path: str, recursive: bool = False) -> None:
        self._sb._t.call("remove_file", {"id": self._sb.id}, query=self._q(path, recursive=recursive))

    def rename(self, src: str, dst: str) -> None:
        self._sb._t.call("rename_file", {"id": self._sb.id}, body={"from": _absolute(src), "to": _absolute(dst)})

    def make_dir(self, path: str, parents: bool = True, mode: Optional[int] = None) -> None:
        body: Dict[str, Any] = {"path": _absolute(path), "parents": parents}
        if mode is not None:
            body["mode"] = mode
        try:
            self._sb._t.call("make_dir", {"id": self._sb.id}, body=body)
        except errors.ConflictError:
            if not parents:
                raise

    def upload(self, local_path: str, remote_path: str) -> None:
        """Copies a local file or directory tree to remote_path."""
        _absolute(remote_path)  # before reading the local tree
        if os.path.isdir(local_path):
            with tempfile.TemporaryFile() as spool:
                with tarfile.open(fileobj=spool, mode="w") as tar:
                    for name in sorted(os.listdir(local_path)):
                        tar.add(os.path.join(local_path, name), arcname=name, filter=_regular_only)
                spool.seek(0)
                self._sb._t.call("upload_archive", {"id": self._sb.id}, query=self._q(remote_path),
                                 body=spool, content_type="application/x-tar", timeout=None)
            return
        with open(local_path, "rb") as f:
            self.write(remote_path, f)

    def download(self, remote_path: str, local_path: str) -> None:
        """Copies a remote file or directory tree to local_path. Archive
        entries that would land outside local_path, links and devices are
        refused: what comes out of a sandbox is untrusted."""
        if not self.stat(remote_path).is_dir:
            resp = self._sb._t.open("read_file", {"id": self._sb.id}, query=self._q(remote_path), timeout=None)
            try:
                with open(local_path, "wb") as f:
                    while True:
                        chunk = resp.read(1 << 16)
                        if not chunk:
                            break
                        f.write(chunk)
            finally:
                resp.close()
            return
        resp = self._sb._t.open("download_archive", {"id": self._sb.id}, query=self._q(remote_path), timeout=None)
        try:
            with tempfile.TemporaryFile() as spool:
                while True:
                    chunk = resp.read(1 << 16)
                    if not chunk:
                        break
                    spool.write(chunk)
                spool.seek(0)
                _safe_extract(spool, local_path)
        finally:
            resp.close()


def _checkpoint_id(cp: Union[str, Checkpoint]) -> str:
    cid = cp.id if isinstance(cp, Checkpoint) else cp
    if not cid:
        raise errors.InvalidError("checkpoint: want a checkpoint ID (cp-...) or a Checkpoint")
    return cid


def _regular_only(ti: tarfile.TarInfo) -> Optional[tarfile.TarInfo]:
    # The server accepts regular files and directories only.
    return ti if (ti.isfile() or ti.isdir()) else None


def _safe_extract(fileobj, dest: str) -> None:
    os.makedirs(dest, exist_ok=True)
    root = os.path.realpath(dest)
    with tarfile.open(fileobj=fileobj, mode="r") as tar:
        for m in tar.getmembers():
            # Entries are named under the tree's base name: strip it, so
            # local_path becomes the downloaded directory.
            name = posixpath.normpath(m.name)
            name = name.split("/", 1)[1] if "/" in name else ""
            if name in (".", ""):
                continue
            if name.startswith("/") or name == ".." or name.startswith("../"):
                raise errors.InvalidError(f"archive entry {m.name!r}: outside the destination")
            target = os.path.realpath(os.path.join(root, name))
            if not (target == root or target.startswith(root + os.sep)):
                raise errors.InvalidError(f"archive entry {m.name!r}: outside the destination")
            if m.isdir():
                os.makedirs(target, exist_ok=True)
            elif m.isfile():
                os.makedirs(os.path.dirname(target), exist_ok=True)
                src = tar.extractfile(m)
                with open(target, "wb") as f:
                    while True:
                        chunk = src.read(1 << 16) if src else b""
                        if not chunk:
                            break
                        f.write(chunk)
                os.chmod(target, m.mode & 0o755)
            # links, devices, fifos: skipped (never followed or created)


class Sandbox:
    """A sandbox of `airlock serve`.

    Create one with Sandbox.create(...); use it as a context manager to
    destroy it on exit::

        with Sandbox.create() as sb:
            print(sb.commands.run("echo hi").stdout)

    The server is $AIRLOCK_HOST (default: the local socket) with
    $AIRLOCK_API_KEY, unless host/api_key are given.
    """

    def __init__(self, info: SandboxInfo, transport: Transport) -> None:
        self._t = transport
        self._info = info
        self._workdir = info.workdir
        self.commands = Commands(self)
        self.files = Files(self)

    # ---- lifecycle ----

    @classmethod
    def create(cls, *, profile: Optional[str] = None, backend: Optional[str] = None,
               policy: Optional[Dict[str, Any]] = None, image: Optional[str] = None,
               timeout: Optional[Duration] = None, keep_alive: Union[bool, Mapping[str, Any]] = False,
               labels: Optional[Mapping[str, str]] = None, env: Optional[Mapping[str, str]] = None,
               volumes: Optional[List[Dict[str, Any]]] = None, auto_resume: bool = False,
               public_ports: bool = False, on_timeout: Optional[str] = None,
               host: Optional[str] = None, api_key: Optional[str] = None) -> "Sandbox":
        """Creates a sandbox. policy is an inline policy (the YAML policy's
        fields as a dict) layered on profile; timeout is its lifetime;
        volumes mounts named volumes: [{"name", "path", "read_only"}].

        keep_alive=True: it never expires; keep_alive={"while": "processes",
        "idle": 30}: it does not expire while a background process runs,
        then expires once idle that long (seconds or "30s"; default: the
        server's idle timeout) and past its timeout. auto_resume=True: a
        request to it while it is paused or frozen resumes it first.
        public_ports=True: its ports answer anyone who knows its ID, without
        a key or token. on_timeout="pause": its timeout pauses it (memory
        kept) instead of destroying it."""
        t = Transport(host, api_key)
        body: Dict[str, Any] = {}
        for k, v in (("profile", profile), ("backend", backend), ("policy", policy), ("image", image),
                     ("timeout", _duration(timeout)), ("labels", dict(labels) if labels else None),
                     ("env", dict(env) if env else None), ("volumes", list(volumes) if volumes else None)):
            if v is not None:
                body[k] = v
        if isinstance(keep_alive, Mapping):
            spec = dict(keep_alive)
            if "idle" in spec:
                spec["idle"] = _duration(spec["idle"])
            body["keep_alive"] = spec
        elif keep_alive:
            body["keep_alive"] = True
        if auto_resume:
            body["auto_resume"] = True
        if public_ports:
            body["public_ports"] = True
        if on_timeout is not None:
            body["on_timeout"] = on_timeout
        return cls(SandboxInfo.from_json(t.call("create_sandbox", body=body, timeout=None)), t)

    @classmethod
    def connect(cls, sandbox_id: str, *, host: Optional[str] = None, api_key: Optional[str] = None) -> "Sandbox":
        """Attaches to an existing sandbox."""
        t = Transport(host, api_key)
        return cls(SandboxInfo.from_json(t.call("get_sandbox", {"id": sandbox_id})), t)

    @staticmethod
    def list(*, labels: Optional[Mapping[str, str]] = None, all: bool = False,
             host: Optional[str] = None, api_key: Optional[str] = None) -> List[SandboxInfo]:
        """The caller's sandboxes (running ones unless all=True)."""
        q: Dict[str, Any] = {"label": [f"{k}={v}" for k, v in (labels or {}).items()], "all": all or None}
        r = Transport(host, api_key).call("list_sandboxes", query=q)
        return [SandboxInfo.from_json(s) for s in r.get("sandboxes", [])]

    @property
    def id(self) -> str:
        return self._info.id

    @property
    def workdir(self) -> str:
        """The default working directory (and $HOME) inside the sandbox."""
        return self._workdir

    def info(self) -> SandboxInfo:
        """Fetches the sandbox's current description (with resource use)."""
        return self._remember(self._t.call("get_sandbox", {"id": self.id}))

    def _remember(self, answer: Dict[str, Any]) -> SandboxInfo:
        """Keeps answer as the sandbox's description. A paused or stopped
        sandbox's has no workdir, which a pause does not change: the last
        one known stays."""
        self._info = SandboxInfo.from_json(answer)
        self._workdir = self._info.workdir or self._workdir
        return self._info

    def set_timeout(self, timeout: Duration) -> SandboxInfo:
        """Makes the sandbox expire timeout from now."""
        return SandboxInfo.from_json(self._t.call("patch_sandbox", {"id": self.id}, body={"timeout": _duration(timeout)}))

    def keep_alive(self, keep: bool = True) -> SandboxInfo:
        """Turns expiry off (or back on)."""
        return SandboxInfo.from_json(self._t.call("patch_sandbox", {"id": self.id}, body={"keep_alive": keep}))

    def set_network(self, mode: str, allow: Optional[Iterable[str]] = None, deny: Optional[Iterable[str]] = None) -> None:
        """Replaces the sandbox's egress rules (audited; only from outside)."""
        body: Dict[str, Any] = {"mode": mode}
        if allow:
            body["allow"] = list(allow)
        if deny:
            body["deny"] = list(deny)
        self._t.call("set_network", {"id": self.id}, body=body)

    def kill(self) -> None:
        """Destroys the sandbox and everything in it. Idempotent."""
        self._t.call("delete_sandbox", {"id": self.id})

    close = kill

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.kill()
        except errors.NotFoundError:
            pass

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, backend={self._info.backend!r})"

    # ---- pause, resume, checkpoints, rollback ----

    def pause(self, memory: bool = False) -> SandboxInfo:
        """Pauses the sandbox: its processes end, its files, checkpoints and
        record are kept (state "paused", which survives a server restart)
        and resume() starts it again on the same files, same ID. Background
        processes and interpreter state do not survive it. Pausing a
        paused sandbox is a no-op.

        With memory=True its processes are frozen in place instead, memory
        kept, while the server lives (state "frozen"); requests to it then
        raise ConflictError until resume(), unless it was created with
        auto_resume=True.

        Native sandboxes without an image whose workspace is a disk volume
        (policy limits.disk) or in the server's data directory can be
        paused; others raise NotSupportedError saying why."""
        body = {"memory": True} if memory else None
        return self._remember(self._t.call("pause", {"id": self.id}, body=body, timeout=None))

    def resume(self) -> SandboxInfo:
        """Starts a paused sandbox again on its files (same ID), or thaws a
        frozen one; a running one is returned as it is. Files changed while
        it was paused raise CorruptError naming the file, and it stays
        paused. The answer's verified says its files matched the manifest
        its pause recorded (False after a server crash)."""
        return self._remember(self._t.call("resume", {"id": self.id}, timeout=None))

    def checkpoint(self, name: Optional[str] = None) -> Checkpoint:
        """Records the sandbox's workspace (every file's content, mode and
        owner; each distinct content stored once) and returns the
        checkpoint, whose id rollback() takes. name is a label of yours (at
        most 128 bytes). A tenant's checkpoints are bounded in count and
        bytes: beyond, LimitExceededError."""
        body = {"name": name} if name else None
        return _build(Checkpoint, self._t.call("create_checkpoint", {"id": self.id}, body=body, timeout=None))

    def checkpoints(self) -> List[Checkpoint]:
        """The sandbox's checkpoints, oldest first."""
        r = self._t.call("list_checkpoints", {"id": self.id})
        return [_build(Checkpoint, c) for c in r.get("checkpoints") or []]

    def delete_checkpoint(self, checkpoint: Union[str, Checkpoint]) -> None:
        """Deletes a checkpoint (its ID, or the Checkpoint); content another
        checkpoint shares is kept."""
        self._t.call("delete_checkpoint", {"id": self.id, "checkpoint": _checkpoint_id(checkpoint)})

    def rollback(self, checkpoint: Union[str, Checkpoint]) -> SandboxInfo:
        """Restores the workspace to checkpoint (its ID, or the Checkpoint)
        in place: same ID, its processes restarted. Every stored file is
        checked against the checkpoint's manifest first: a changed or
        missing one raises CorruptError naming it, and the sandbox is left
        as it was."""
        body = {"checkpoint": _checkpoint_id(checkpoint)}
        return self._remember(self._t.call("rollback", {"id": self.id}, body=body, timeout=None))

    # ---- code interpreter, events ----

    def run_code(self, code: str, language: str = "python", timeout: Optional[Duration] = None) -> CodeResult:
        """Runs code as the next cell of the sandbox's interpreter for
        language ("python" or "javascript"), which keeps its state between
        calls. A cell that raises returns a result with .error set; figures
        drawn with matplotlib come back in .images as PNG."""
        body: Dict[str, Any] = {"code": code, "language": language}
        if timeout is not None:
            body["timeout"] = _duration(timeout)
        return CodeResult.from_json(self._t.call("run_code", {"id": self.id}, body=body, timeout=None))

    def browser_navigate(self, url: str, width: Optional[int] = None, height: Optional[int] = None) -> Dict[str, str]:
        """Opens url in the sandbox's headless browser (Chromium inside the
        sandbox, started on first use; the image must have it) and returns
        the page's "url" and "title" once it loaded. width and height set
        the viewport when this call starts the browser."""
        body: Dict[str, Any] = {"url": url}
        if width:
            body["width"] = width
        if height:
            body["height"] = height
        r = self._t.call("browser_navigate", {"id": self.id}, body=body, timeout=None)
        return {"url": r.get("url", ""), "title": r.get("title", "")}

    def browser_screenshot(self, url: Optional[str] = None, full_page: bool = False) -> bytes:
        """A PNG of the sandbox browser's page, after opening url first when
        it is given."""
        body: Dict[str, Any] = {"full_page": full_page}
        if url:
            body["url"] = url
        r = self._t.call("browser_screenshot", {"id": self.id}, body=body, timeout=None)
        return base64.b64decode(r.get("data", ""))

    def url(self, port: int) -> str:
        """The URL of port inside the sandbox: HTTP and WebSocket requests to
        it (and below it) reach 127.0.0.1:port in the sandbox, with this
        client's API key. For a browser, use port_token(port)["url"]."""
        return f"{self._t.base_url()}/v1/sandboxes/{self.id}/ports/{int(port)}/"

    def port_token(self, port: int, ttl: Optional[Duration] = None) -> Dict[str, Any]:
        """Mints a token that lets its holder reach port without an API key
        until it expires (ttl; the server's default is 15 minutes). The
        answer's url (absolute) and preview_url carry it."""
        body: Dict[str, Any] = {"port": int(port)}
        if ttl is not None:
            body["ttl"] = _duration(ttl)
        r = self._t.call("port_token", {"id": self.id}, body=body)
        r["url"] = self._t.base_url() + r["url"]
        return r

    def access_token(self, scope: str = "sandbox") -> str:
        """The sandbox's access token of scope ("sandbox": its in-sandbox
        routes, never its lifecycle; "ports": its ports only): a Bearer
        credential for this one sandbox, worth nothing once it is gone."""
        return self._t.call("access_token", {"id": self.id}, body={"scope": scope})["token"]

    def events(self, after: int = 0) -> List[Event]:
        """The sandbox's audit events after sequence number after."""
        r = self._t.call("events", {"id": self.id}, query={"after": after})
        return [_build(Event, e) for e in r.get("events", [])]

    @staticmethod
    def health(host: Optional[str] = None, api_key: Optional[str] = None) -> Dict[str, Any]:
        """The server's health and backend probes."""
        return Transport(host, api_key).call("health")
