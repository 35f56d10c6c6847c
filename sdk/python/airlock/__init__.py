"""Airlock's Python SDK: sandboxes for AI agents, driven through `airlock serve`.

    from airlock import Sandbox

    with Sandbox.create() as sb:
        print(sb.commands.run("uname -a").stdout)
        sb.files.write("/tmp/data.csv", "a,b\\n1,2\\n")
        print(sb.run_code("import csv; list(csv.reader(open('/tmp/data.csv')))").text)

Standard library only. The server is $AIRLOCK_HOST (default: the local
socket) with $AIRLOCK_API_KEY. AsyncSandbox (airlock.aio) is the asyncio
flavour.
"""

from .aio import AsyncCommandHandle, AsyncSandbox
from .errors import (AirlockError, ClosedError, CommandExitError, ConflictError, CorruptError,
                     InvalidError, LimitExceededError, NotFoundError, NotSupportedError,
                     PermissionDeniedError, TimeoutError, TooLargeError, UnauthenticatedError,
                     UnavailableError)
from .sandbox import CommandHandle, Commands, Files, Sandbox
from .types import (Checkpoint, CodeError, CodeImage, CodeResult, CommandResult, Event, ExitStatus,
                    FileInfo, ProcessInfo, SandboxInfo, Stats)

__version__ = "0.1.0"

__all__ = [
    "Sandbox", "AsyncSandbox", "Commands", "Files", "CommandHandle", "AsyncCommandHandle",
    "CodeResult", "CodeError", "CodeImage", "CommandResult", "ExitStatus", "FileInfo", "ProcessInfo",
    "SandboxInfo", "Stats", "Event", "Checkpoint",
    "AirlockError", "InvalidError", "UnauthenticatedError", "PermissionDeniedError", "NotFoundError",
    "ConflictError", "CorruptError", "ClosedError", "TooLargeError", "LimitExceededError", "NotSupportedError",
    "UnavailableError", "TimeoutError", "CommandExitError",
]
