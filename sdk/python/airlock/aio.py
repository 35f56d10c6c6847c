"""The asyncio flavour of the SDK: AsyncSandbox mirrors Sandbox with
coroutines. Each call runs the blocking standard-library client in a worker
thread (asyncio.to_thread), so the event loop never blocks; output
callbacks are called on the event loop (coroutine functions are awaited
there)."""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from .sandbox import CommandHandle, Duration, Sandbox
from .types import Checkpoint, CodeResult, CommandResult, Event, FileInfo, ProcessInfo, SandboxInfo


def _on_loop(cb: Optional[Callable[[str], Any]], loop: asyncio.AbstractEventLoop) -> Optional[Callable[[str], Any]]:
    """Wraps cb so a worker thread's call runs it on loop."""
    if cb is None:
        return None

    def call(text: str) -> None:
        if inspect.iscoroutinefunction(cb):
            asyncio.run_coroutine_threadsafe(cb(text), loop)
        else:
            loop.call_soon_threadsafe(cb, text)
    return call


async def _run(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    return await asyncio.to_thread(functools.partial(fn, *args, **kw))


class AsyncCommandHandle:
    """A background command (await commands.run(..., background=True))."""

    def __init__(self, h: CommandHandle) -> None:
        self._h = h

    @property
    def id(self) -> str:
        return self._h.id

    @property
    def pid(self) -> int:
        return self._h.pid

    async def wait(self, on_stdout: Optional[Callable[[str], Any]] = None,
                   on_stderr: Optional[Callable[[str], Any]] = None) -> CommandResult:
        loop = asyncio.get_running_loop()
        return await _run(self._h.wait, _on_loop(on_stdout, loop), _on_loop(on_stderr, loop))

    async def send_stdin(self, data: Union[str, bytes], eof: bool = True) -> None:
        await _run(self._h.send_stdin, data, eof)

    async def kill(self) -> None:
        await _run(self._h.kill)

    async def refresh(self) -> ProcessInfo:
        return await _run(self._h.refresh)


class AsyncCommands:
    def __init__(self, sb: Sandbox) -> None:
        self._c = sb.commands

    async def run(self, cmd: Union[str, Sequence[str]], *, background: bool = False,
                  on_stdout: Optional[Callable[[str], Any]] = None,
                  on_stderr: Optional[Callable[[str], Any]] = None, **kw: Any) -> Any:
        """See Commands.run; returns a CommandResult, or an
        AsyncCommandHandle with background=True."""
        loop = asyncio.get_running_loop()
        r = await _run(self._c.run, cmd, background=background, on_stdout=_on_loop(on_stdout, loop),
                       on_stderr=_on_loop(on_stderr, loop), **kw)
        if background:
            return AsyncCommandHandle(r)
        # Let callbacks scheduled by the worker run before the caller resumes.
        await asyncio.sleep(0)
        return r

    async def list(self) -> List[ProcessInfo]:
        return await _run(self._c.list)


class AsyncFiles:
    def __init__(self, sb: Sandbox) -> None:
        self._f = sb.files

    async def read(self, path: str, format: str = "text") -> Union[str, bytes]:
        return await _run(self._f.read, path, format)

    async def write(self, path: str, data: Union[str, bytes], mode: Optional[int] = None, mkdirs: bool = True) -> Dict[str, Any]:
        return await _run(self._f.write, path, data, mode, mkdirs)

    async def list(self, path: str) -> List[FileInfo]:
        return await _run(self._f.list, path)

    async def stat(self, path: str) -> FileInfo:
        return await _run(self._f.stat, path)

    async def exists(self, path: str) -> bool:
        return await _run(self._f.exists, path)

    async def remove(self, path: str, recursive: bool = False) -> None:
        await _run(self._f.remove, path, recursive)

    async def rename(self, src: str, dst: str) -> None:
        await _run(self._f.rename, src, dst)

    async def make_dir(self, path: str, parents: bool = True) -> None:
        await _run(self._f.make_dir, path, parents)

    async def upload(self, local_path: str, remote_path: str) -> None:
        await _run(self._f.upload, local_path, remote_path)

    async def download(self, remote_path: str, local_path: str) -> None:
        await _run(self._f.download, remote_path, local_path)


class AsyncSandbox:
    """Sandbox for asyncio::

        async with await AsyncSandbox.create() as sb:
            r = await sb.commands.run("echo hi")
    """

    def __init__(self, sb: Sandbox) -> None:
        self._sb = sb
        self.commands = AsyncCommands(sb)
        self.files = AsyncFiles(sb)

    @classmethod
    async def create(cls, **kw: Any) -> "AsyncSandbox":
        """See Sandbox.create."""
        return cls(await _run(Sandbox.create, **kw))

    @classmethod
    async def connect(cls, sandbox_id: str, **kw: Any) -> "AsyncSandbox":
        return cls(await _run(Sandbox.connect, sandbox_id, **kw))

    @staticmethod
    async def list(**kw: Any) -> List[SandboxInfo]:
        return await _run(Sandbox.list, **kw)

    @property
    def id(self) -> str:
        return self._sb.id

    @property
    def workdir(self) -> str:
        return self._sb.workdir

    async def info(self) -> SandboxInfo:
        return await _run(self._sb.info)

    async def set_timeout(self, timeout: Duration) -> SandboxInfo:
        return await _run(self._sb.set_timeout, timeout)

    async def pause(self, memory: bool = False) -> SandboxInfo:
        """See Sandbox.pause."""
        return await _run(self._sb.pause, memory)

    async def resume(self) -> SandboxInfo:
        """See Sandbox.resume."""
        return await _run(self._sb.resume)

    async def checkpoint(self, name: Optional[str] = None) -> Checkpoint:
        """See Sandbox.checkpoint."""
        return await _run(self._sb.checkpoint, name)

    async def checkpoints(self) -> List[Checkpoint]:
        """See Sandbox.checkpoints."""
        return await _run(self._sb.checkpoints)

    async def delete_checkpoint(self, checkpoint: Union[str, Checkpoint]) -> None:
        """See Sandbox.delete_checkpoint."""
        await _run(self._sb.delete_checkpoint, checkpoint)

    async def rollback(self, checkpoint: Union[str, Checkpoint]) -> SandboxInfo:
        """See Sandbox.rollback."""
        return await _run(self._sb.rollback, checkpoint)

    async def run_code(self, code: str, language: str = "python", timeout: Optional[Duration] = None) -> CodeResult:
        return await _run(self._sb.run_code, code, language, timeout)

    async def browser_navigate(self, url: str, width: Optional[int] = None, height: Optional[int] = None) -> Dict[str, str]:
        return await _run(self._sb.browser_navigate, url, width, height)

    async def browser_screenshot(self, url: Optional[str] = None, full_page: bool = False) -> bytes:
        return await _run(self._sb.browser_screenshot, url, full_page)

    async def events(self, after: int = 0) -> List[Event]:
        return await _run(self._sb.events, after)

    async def kill(self) -> None:
        await _run(self._sb.kill)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await _run(self._sb.__exit__, *exc)
