"""Errors of the Airlock SDK.

Every error answer of the server becomes an AirlockError subclass chosen by
its stable code ({"error": {"code": ..., "message": ...}}), so callers catch
NotFoundError rather than compare status numbers.
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class AirlockError(Exception):
    """An error answer of the server (or of the connection to it)."""

    def __init__(self, message: str, status: int = 0, code: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code

    def __str__(self) -> str:
        if self.status:
            return f"{self.message} ({self.status} {self.code})"
        return self.message


class InvalidError(AirlockError):
    """400: bad input (the message says which field and why)."""


class UnauthenticatedError(AirlockError):
    """401: no API key, or a wrong or revoked one."""


class PermissionDeniedError(AirlockError):
    """403: the sandbox's policy forbids it."""


class NotFoundError(AirlockError):
    """404: no such sandbox, process, file or command (or interpreter)."""


class ConflictError(AirlockError):
    """409: it already exists, or the sandbox is not in a state the request
    needs (paused or frozen: resume it; being paused or destroyed, stopped)."""


class CorruptError(ConflictError):
    """409: stored state (a checkpoint, a paused sandbox's files) no longer
    matches the manifest of hashes recorded with it; the message names the
    file. The sandbox is left as it was."""


class ClosedError(AirlockError):
    """410: the sandbox ended while the request ran."""


class TooLargeError(AirlockError):
    """413: a body over the server's limit."""


class LimitExceededError(AirlockError):
    """429: a quota or resource limit."""


class NotSupportedError(AirlockError):
    """501: the backend cannot do this."""


class UnavailableError(AirlockError):
    """503: a backend or protection is missing on the server's host."""


class TimeoutError(AirlockError):  # noqa: A001 - the API's name for 504
    """504: it took longer than allowed."""


class CommandNotFoundError(NotFoundError):
    """404: the command does not exist in the sandbox."""


class CannotExecuteError(PermissionDeniedError):
    """403: the command exists but cannot be executed."""


class CommandExitError(AirlockError):
    """A command run with check=True exited with a non-zero code."""

    def __init__(self, result) -> None:
        super().__init__(f"command exited with code {result.exit_code}: {result.stderr[-500:]}")
        self.result = result


_BY_CODE: Dict[str, Type[AirlockError]] = {
    "invalid": InvalidError,
    "unsupported_media_type": InvalidError,
    "method_not_allowed": InvalidError,
    "unauthenticated": UnauthenticatedError,
    "permission_denied": PermissionDeniedError,
    "not_found": NotFoundError,
    "command_not_found": CommandNotFoundError,
    "cannot_execute": CannotExecuteError,
    "exists": ConflictError,
    "conflict": ConflictError,
    "corrupt": CorruptError,
    "closed": ClosedError,
    "too_large": TooLargeError,
    "insufficient_storage": LimitExceededError,
    "limit_exceeded": LimitExceededError,
    "not_supported": NotSupportedError,
    "unavailable": UnavailableError,
    "timeout": TimeoutError,
}


def from_answer(status: int, code: Optional[str], message: str) -> AirlockError:
    """The exception for an error answer."""
    return _BY_CODE.get(code or "", AirlockError)(message, status, code or "http")
