"""Starts one real `airlock serve` (the binary built from this tree,
$AIRLOCK_BIN) for the whole test run, on a private socket, and stops it at
exit. When it cannot run here (not Linux, not root, no binary) the tests
skip -- except in CI (CI=true), where everything is installed and a skip
would hide a failure, so they fail instead."""

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))

_state = {}


def in_ci() -> bool:
    return os.environ.get("CI", "") != ""


def require(cond: bool, reason: str) -> None:
    """Skips the test when cond is false, or fails it in CI."""
    if cond:
        return
    if in_ci():
        raise AssertionError("required in CI but unavailable: " + reason)
    raise unittest.SkipTest(reason)


def binary() -> str:
    return os.environ.get("AIRLOCK_BIN") or os.path.join(ROOT, "bin", "airlock")


def server() -> str:
    """The AIRLOCK_HOST of the shared test server (started on first use)."""
    if "host" in _state:
        return _state["host"]
    require(sys.platform.startswith("linux"), "needs Linux")
    require(os.geteuid() == 0, "needs root (the native backend)")
    require(os.path.exists(binary()), f"no airlock binary at {binary()} (make build)")
    d = tempfile.mkdtemp(prefix="airlock-pysdk-")
    sock = os.path.join(d, "airlock.sock")
    log = open(os.path.join(d, "serve.log"), "wb")
    p = subprocess.Popen([binary(), "serve", "--socket", sock, "--data", os.path.join(d, "data"),
                          "--backend", "native"], stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)

    def stop() -> None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
        log.close()
        shutil.rmtree(d, ignore_errors=True)
    atexit.register(stop)
    host = "unix://" + sock
    from airlock import Sandbox
    deadline = time.monotonic() + 30
    while True:
        if p.poll() is not None:
            raise RuntimeError("airlock serve exited: " + open(log.name).read()[-4000:])
        try:
            Sandbox.health(host=host)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    _state["host"] = host
    os.environ["AIRLOCK_HOST"] = host
    return host


def sandbox_has(sb, module: str) -> bool:
    """Whether the sandbox's python3 can import module."""
    return sb.commands.run(["python3", "-c", "import " + module]).exit_code == 0
