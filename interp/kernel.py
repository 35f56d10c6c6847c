# Airlock's Python kernel: a stateful interpreter that runs code cells sent by
# the host, one at a time, in one namespace. It runs INSIDE a sandbox and is
# started by the host as `python3 -c <this file>`; standard library only.
#
# Protocol (see interp/doc.go): the host writes one JSON object per line to
# the kernel's stdin ({"id": N, "code": "..."}); the kernel answers one JSON
# object per line on its original stdout ({"type": "ready", ...} once, then
# {"type": "result", "id": N, ...} per cell). The host trusts none of it.
#
# Cells never see the protocol streams: fds 0/1 are moved away at start, a
# cell's fd 1 and 2 point at private memory files (so output of subprocesses
# is captured too) and its stdin is /dev/null. SIGINT interrupts a running
# cell (KeyboardInterrupt) and is ignored between cells.

import ast
import asyncio
import base64
import inspect
import io
import json
import linecache
import os
import signal
import sys
import tempfile
import traceback
import warnings

__airlock_kernel__ = True

MAX_STREAM = 1 << 20  # bytes of stdout and of stderr kept per cell
MAX_TEXT = 64 << 10  # bytes of the result's repr and of the traceback
MAX_IMAGES = 8 << 20  # bytes of PNG data per cell
MAX_REQUEST = 8 << 20  # bytes of one request line

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("MPLCONFIGDIR", os.path.join(tempfile.gettempdir(), ".airlock-matplotlib"))
warnings.filterwarnings("ignore", message=".*non-GUI backend.*")
warnings.filterwarnings("ignore", message=".*non-interactive.*")

proto_in = os.fdopen(os.dup(0), "rb")
proto_out = os.fdopen(os.dup(1), "wb")
diag_fd = os.dup(2)
_null = os.open(os.devnull, os.O_RDWR)
os.dup2(_null, 0)
os.dup2(diag_fd, 1)
sys.stdin = open(os.devnull)

running = False


def on_sigint(signum, frame):
    if running:
        raise KeyboardInterrupt
    # Between cells an interrupt has nothing to stop.


signal.signal(signal.SIGINT, on_sigint)

namespace = {"__name__": "__main__", "__builtins__": __builtins__}
loop = asyncio.new_event_loop()


def send(msg):
    proto_out.write(json.dumps(msg, ensure_ascii=False).encode("utf-8", "replace") + b"\n")
    proto_out.flush()


def clip(s, limit):
    b = s.encode("utf-8", "replace")
    if len(b) <= limit:
        return s, False
    return b[:limit].decode("utf-8", "ignore") + "\n[... truncated]", True


def memfile(name):
    try:
        return os.memfd_create(name)
    except (AttributeError, OSError):
        f = tempfile.TemporaryFile()
        return os.dup(f.fileno())


def drain(fd):
    size = os.lseek(fd, 0, os.SEEK_END)
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    want = min(size, MAX_STREAM)
    while len(data) < want:
        chunk = os.read(fd, want - len(data))
        if not chunk:
            break
        data += chunk
    os.close(fd)
    text = data.decode("utf-8", "replace")
    if size > MAX_STREAM:
        return text + "\n[... %d bytes truncated]" % (size - MAX_STREAM), True
    return text, False


def figures():
    """PNG images of every open matplotlib figure (closed afterwards)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return [], ""
    images, total, note = [], 0, ""
    try:
        for num in plt.get_fignums():
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png", bbox_inches="tight")
            data = buf.getvalue()
            if total + len(data) > MAX_IMAGES:
                note = "[airlock: images beyond %d bytes dropped]\n" % MAX_IMAGES
                break
            total += len(data)
            images.append({"format": "png", "data": base64.b64encode(data).decode("ascii")})
    except Exception as e:  # a broken figure must not lose the cell's answer
        note = "[airlock: could not render a figure: %s]\n" % e
    finally:
        try:
            plt.close("all")
        except Exception:
            pass
    return images, note


def user_traceback(etype, value, tb):
    # Drop the kernel's own frames: the model needs its code's frames only.
    while tb is not None and tb.tb_frame.f_globals.get("__airlock_kernel__"):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(etype, value, tb))
    return clip(text, MAX_TEXT)[0]


def evaluate(code, filename):
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = ast.parse(code, filename=filename, mode="exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    for co in [compile(tree, filename, "exec", flags=flags)] + (
        [compile(last, filename, "eval", flags=flags)] if last is not None else []
    ):
        value = eval(co, namespace)
        if inspect.iscoroutine(value):
            value = loop.run_until_complete(value)
    return value if last is not None else None


def run_cell(req, count):
    global running
    code = req.get("code")
    if not isinstance(code, str):
        raise ValueError("code: want a string")
    filename = "<cell %d>" % count
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    out_fd, err_fd = memfile("airlock-stdout"), memfile("airlock-stderr")
    saved = (sys.stdout, sys.stderr)
    reply = {"type": "result", "id": req.get("id"), "result": None, "error": None, "images": []}
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        try:
            running = True
            value = evaluate(code, filename)
            running = False
            if value is not None:
                namespace["_"] = value
                reply["result"] = clip(repr(value), MAX_TEXT)[0]
        except BaseException as e:  # SystemExit and KeyboardInterrupt included
            running = False
            reply["error"] = {
                "name": type(e).__name__,
                "value": clip(str(e), MAX_TEXT)[0],
                "traceback": user_traceback(type(e), e, e.__traceback__),
            }
        images, note = figures()
        reply["images"] = images
    finally:
        running = False
        for s in (sys.stdout, sys.stderr, saved[0], saved[1]):
            try:
                s.flush()
            except Exception:
                pass
        sys.stdout, sys.stderr = saved
        os.dup2(diag_fd, 1)
        os.dup2(diag_fd, 2)
    reply["stdout"], t1 = drain(out_fd)
    reply["stderr"], t2 = drain(err_fd)
    if note:
        reply["stderr"] += note
    reply["truncated"] = t1 or t2
    return reply


def main():
    send({"type": "ready", "language": "python", "version": sys.version.split()[0]})
    count = 0
    while True:
        try:
            line = proto_in.readline(MAX_REQUEST + 1)
        except KeyboardInterrupt:
            continue
        if not line:
            return
        if len(line) > MAX_REQUEST:
            send({"type": "fatal", "message": "request larger than %d bytes" % MAX_REQUEST})
            return
        count += 1
        req = None
        try:
            req = json.loads(line)
            reply = run_cell(req, count)
        except BaseException as e:
            reply = {"type": "result", "id": None, "stdout": "", "stderr": "", "result": None, "images": [],
                     "error": {"name": "KernelError", "value": clip(str(e), MAX_TEXT)[0], "traceback": ""}}
            if isinstance(req, dict):
                reply["id"] = req.get("id")
        reply["execution_count"] = count
        send(reply)


main()
