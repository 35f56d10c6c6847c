"""HTTP to `airlock serve` over its unix socket or TCP, with the standard
library only. One connection per call: the server is local or close, and
it keeps the transport free of shared state between threads."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import urllib.parse
from typing import Any, Dict, Iterator, Optional, Tuple, Union

from . import errors
from ._routes import ROUTES

ENV_HOST = "AIRLOCK_HOST"
ENV_API_KEY = "AIRLOCK_API_KEY"

Body = Union[None, bytes, Dict[str, Any], Any]


def default_socket() -> str:
    """Where `airlock serve` listens by default (as the Go SDK decides)."""
    if os.geteuid() == 0:
        return "/run/airlock/airlock.sock"
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run:
        return os.path.join(run, "airlock", "airlock.sock")
    import tempfile
    return os.path.join(tempfile.gettempdir(), f"airlock-{os.geteuid()}", "airlock.sock")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("airlock", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Transport:
    """Sends API requests to one server. Safe to share between threads."""

    def __init__(self, host: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: Optional[float] = 300.0) -> None:
        host = host if host is not None else os.environ.get(ENV_HOST, "")
        self.api_key = api_key if api_key is not None else os.environ.get(ENV_API_KEY, "")
        self.timeout = timeout
        if not host:
            host = default_socket()
        if host.startswith("unix://"):
            self._unix: Optional[str] = host[len("unix://"):]
        elif host.startswith("/"):
            self._unix = host
        elif host.startswith(("http://", "https://")):
            self._unix = None
            u = urllib.parse.urlsplit(host)
            if not u.hostname:
                raise errors.InvalidError(f"host {host!r}: want unix:///path, /path or http(s)://host:port")
            self._scheme, self._netloc, self._prefix = u.scheme, u.netloc, u.path.rstrip("/")
        else:
            raise errors.InvalidError(f"host {host!r}: want unix:///path, /path or http(s)://host:port")
        self.host = host

    def base_url(self) -> str:
        """The server's URL; on a unix socket a placeholder host that only
        this transport's connections reach."""
        if self._unix is not None:
            return "http://airlock"
        return f"{self._scheme}://{self._netloc}{self._prefix}"

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._unix is not None:
            return _UnixConnection(self._unix, timeout)
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._netloc, timeout=timeout, context=ssl.create_default_context())
        return http.client.HTTPConnection(self._netloc, timeout=timeout)

    def _path(self, op: str, params: Dict[str, str], query: Optional[Dict[str, Any]]) -> Tuple[str, str]:
        method, template = ROUTES[op]
        path = template
        for k, v in params.items():
            path = path.replace("{" + k + "}", urllib.parse.quote(str(v), safe=""))
        if self._unix is None:
            path = self._prefix + path
        if query:
            q = []
            for k, v in query.items():
                if v is None:
                    continue
                for item in (v if isinstance(v, (list, tuple)) else [v]):
                    q.append((k, str(item).lower() if isinstance(item, bool) else str(item)))
            if q:
                path += "?" + urllib.parse.urlencode(q)
        return method, path

    def open(self, op: str, params: Optional[Dict[str, str]] = None, *, query: Optional[Dict[str, Any]] = None,
             body: Body = None, content_type: Optional[str] = None, accept: Optional[str] = None,
             timeout: Optional[float] = -1.0) -> http.client.HTTPResponse:
        """Sends op and returns the 2xx response (the caller reads and closes it)."""
        method, path = self._path(op, params or {}, query)
        headers = {}
        data: Optional[bytes] = None
        if isinstance(body, (bytes, bytearray)):
            data = bytes(body)
            headers["Content-Type"] = content_type or "application/octet-stream"
        elif body is not None and hasattr(body, "read"):
            data = body  # a file object: http.client streams it
            headers["Content-Type"] = content_type or "application/octet-stream"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if accept:
            headers["Accept"] = accept
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        conn = self._connection(self.timeout if timeout == -1.0 else timeout)
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
        except OSError as e:
            raise errors.AirlockError(f"{method} {path}: cannot reach airlock serve at {self.host}: {e}") from e
        finally:
            # Drop the connection's reference to the socket: the response
            # keeps it open until the response itself is closed.
            sock, conn.sock = conn.sock, None
            if sock is not None:
                sock.close()
        if resp.status // 100 != 2:
            raw = resp.read(1 << 20)
            resp.close()
            try:
                info = json.loads(raw)["error"]
                raise errors.from_answer(resp.status, info.get("code"), info.get("message", ""))
            except (ValueError, KeyError, TypeError):
                raise errors.from_answer(resp.status, None, raw.decode("utf-8", "replace").strip() or resp.reason)
        return resp

    def call(self, op: str, params: Optional[Dict[str, str]] = None, **kw: Any) -> Any:
        """Sends op and decodes its JSON answer (None when it has no body)."""
        resp = self.open(op, params, **kw)
        try:
            raw = resp.read()
        finally:
            resp.close()
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw

    def frames(self, resp: http.client.HTTPResponse) -> Iterator[Dict[str, Any]]:
        """Yields the NDJSON frames of a streamed answer."""
        try:
            while True:
                line = resp.readline()
                if not line:
                    return
                line = line.strip()
                if line:
                    yield json.loads(line)
        finally:
            resp.close()
