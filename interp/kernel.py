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
import re
import shlex
import os
import signal
import sys
import select
import subprocess
import tempfile
import threading
import traceback
import warnings

__airlock_kernel__ = True

MAX_STREAM = 1 << 20  # bytes of stdout and of stderr kept per cell
MAX_TEXT = 64 << 10  # bytes of the result's repr and of the traceback
MAX_IMAGES = 8 << 20  # bytes of PNG data per cell
MAX_REQUEST = 8 << 20  # bytes of one request line
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

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


send_lock = threading.Lock()


def send(msg):
    with send_lock:
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


CHUNK = 32 << 10  # bytes of one streamed output message


class Streamer:
    """Streams what is written to a pipe as "stream" messages of request
    rid (at most MAX_STREAM bytes; the rest is dropped with a note)."""

    def __init__(self, rid, name, fds=None):
        self.rid, self.name, self.sent, self.dropped = rid, name, 0, False
        self.owned = fds is None
        self.rfd, self.wfd = fds or os.pipe()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.pump, daemon=True)
        self.thread.start()

    def emit(self, data):
        room = MAX_STREAM - self.sent
        if room <= 0:
            if not self.dropped:
                self.dropped = True
                send({"type": "stream", "id": self.rid, "name": self.name, "text": "\n[... output truncated]\n"})
            return
        data = data[:room]
        self.sent += len(data)
        if getattr(self, "keep", None) is not None:
            self.keep.append(data)
            return
        send({"type": "stream", "id": self.rid, "name": self.name, "text": data.decode("utf-8", "replace")})

    def pump(self):
        while True:
            ready, _, _ = select.select([self.rfd], [], [], 0.05)
            if not ready:
                if self.stop.is_set():
                    return
                continue
            data = os.read(self.rfd, CHUNK)
            if not data:
                return
            self.emit(data)

    def finish(self):
        """Stops after what is written so far (a background child that
        keeps the pipe open cannot hold the cell's answer)."""
        self.stop.set()
        self.thread.join()
        if self.owned:
            os.close(self.rfd)


def bundle(value):
    """The representations of value E2B's results carry (IPython's
    _repr_*_ methods), beside its text."""
    b = {"text": clip(repr(value), MAX_TEXT)[0]}
    for name, key in (("_repr_html_", "html"), ("_repr_markdown_", "markdown"), ("_repr_svg_", "svg"),
                      ("_repr_png_", "png"), ("_repr_jpeg_", "jpeg"), ("_repr_latex_", "latex"),
                      ("_repr_json_", "json"), ("_repr_javascript_", "javascript")):
        fn = getattr(value, name, None)
        if fn is None or not callable(fn):
            continue
        try:
            r = fn()
        except Exception:
            continue
        if isinstance(r, tuple):
            r = r[0]
        if r is None:
            continue
        if isinstance(r, bytes):
            r = base64.b64encode(r).decode("ascii")
        if key == "json":
            b[key] = r
        elif isinstance(r, str):
            b[key] = clip(r, MAX_IMAGES)[0]
    return b


def _num(v):
    try:
        f = float(v)
        return f if f == f else None
    except Exception:
        return str(v)


def _axis_chart(ax):
    """The chart data of one matplotlib Axes (E2B's chart shapes)."""
    from matplotlib.patches import Rectangle, Wedge
    from matplotlib.collections import PathCollection
    c = {"title": ax.get_title() or None, "x_label": ax.get_xlabel() or None, "y_label": ax.get_ylabel() or None,
         "x_scale": ax.get_xscale(), "y_scale": ax.get_yscale(),
         "x_ticks": [_num(t) for t in ax.get_xticks()], "x_tick_labels": [t.get_text() for t in ax.get_xticklabels()],
         "y_ticks": [_num(t) for t in ax.get_yticks()], "y_tick_labels": [t.get_text() for t in ax.get_yticklabels()]}
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges:
        labels = [t.get_text() for t in ax.texts]
        c["type"] = "pie"
        c["elements"] = [{"label": labels[i] if i < len(labels) else "", "angle": _num(w.theta2 - w.theta1),
                          "radius": _num(w.r)} for i, w in enumerate(wedges)]
        return c
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    if bars and not ax.lines:
        labels = [t.get_text() for t in ax.get_xticklabels()]
        elems = []
        for cont in ax.containers:
            for i, r in enumerate(cont):
                elems.append({"label": labels[i] if i < len(labels) else str(i), "group": cont.get_label() or "",
                              "value": _num(r.get_height())})
        c["type"], c["elements"] = "bar", elems
        return c
    scatters = [col for col in ax.collections if isinstance(col, PathCollection)]
    if scatters and not ax.lines:
        c["type"] = "scatter"
        c["elements"] = [{"label": col.get_label(), "points": [[_num(x), _num(y)] for x, y in col.get_offsets()]}
                         for col in scatters]
        return c
    if ax.lines:
        c["type"] = "line"
        c["elements"] = [{"label": l.get_label(), "points": [[_num(x), _num(y)] for x, y in zip(l.get_xdata(), l.get_ydata())]}
                         for l in ax.lines]
        return c
    c["type"], c["elements"] = "unknown", []
    return c


def chart_of(fig):
    try:
        axes = fig.get_axes()
        if len(axes) == 1:
            return _axis_chart(axes[0])
        if axes:
            return {"type": "superchart", "title": fig._suptitle.get_text() if fig._suptitle else None,
                    "elements": [_axis_chart(ax) for ax in axes]}
    except Exception:
        pass
    return None


def rich_figures():
    """Every open matplotlib figure as a display: PNG, text and chart."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    out, total = [], 0
    try:
        for num in plt.get_fignums():
            fig = plt.figure(num)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
            data = buf.getvalue()
            if total + len(data) > MAX_IMAGES:
                break
            total += len(data)
            d = {"text": clip(repr(fig), MAX_TEXT)[0], "png": base64.b64encode(data).decode("ascii")}
            ch = chart_of(fig)
            if ch is not None:
                d["chart"] = ch
            out.append(d)
    except Exception as e:
        out.append({"text": "[airlock: could not render a figure: %s]" % e})
    finally:
        try:
            plt.close("all")
        except Exception:
            pass
    return out


displays = []


def display(*objs):
    """IPython's display(): shows each object as a result of the cell."""
    for o in objs:
        displays.append(bundle(o))


namespace["display"] = display


def run_cell_streamed(req, count):
    """A cell whose output streams as it comes and whose results carry
    every representation (E2B's code interpreter)."""
    global running
    code = req.get("code")
    if not isinstance(code, str):
        raise ValueError("code: want a string")
    rid = req.get("id")
    filename = "<cell %d>" % count
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    del displays[:]
    so, se = Streamer(rid, "stdout"), Streamer(rid, "stderr")
    saved = (sys.stdout, sys.stderr)
    reply = {"type": "result", "id": rid, "result": None, "error": None, "images": [], "stdout": "", "stderr": ""}
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(so.wfd, 1)
        os.dup2(se.wfd, 2)
        os.close(so.wfd)
        os.close(se.wfd)
        sys.stdout = io.TextIOWrapper(os.fdopen(os.dup(1), "wb", buffering=0), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True, write_through=True)
        sys.stderr = io.TextIOWrapper(os.fdopen(os.dup(2), "wb", buffering=0), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True, write_through=True)
        try:
            running = True
            value = evaluate(code, filename)
            running = False
            if value is not None:
                namespace["_"] = value
                reply["result"] = clip(repr(value), MAX_TEXT)[0]
                reply["data"] = bundle(value)
        except BaseException as e:
            running = False
            reply["error"] = {"name": type(e).__name__, "value": clip(str(e), MAX_TEXT)[0],
                              "traceback": user_traceback(type(e), e, e.__traceback__)}
        reply["displays"] = displays[:] + rich_figures()
    finally:
        running = False
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
                s.close()
            except Exception:
                pass
        sys.stdout, sys.stderr = saved
        os.dup2(diag_fd, 1)
        os.dup2(diag_fd, 2)
        so.finish()
        se.finish()
    return reply


class Bash:
    """A bash process whose variables, functions and working directory
    live across cells. It is an interactive bash (as a terminal's, and
    as E2B's Jupyter bash kernel) reading one command line per cell from
    its stdin, so that SIGINT ends the cell's command line and bash then
    reads the next one, its state kept; a non-interactive bash would die
    of it. Each line eval's the cell (base64 on the line) and reports
    "TOKEN STATUS" on fd 3; after an interrupt an acknowledgement line
    reports for the cell, so status lines are matched by token."""

    INIT = ("exec 3>&SW SW>&- 2>&ERR ERR>&-; PS1= PS2= PS0= PROMPT_COMMAND=; "
            "set +o history +H; unset HISTFILE MAILCHECK TMOUT")

    def __init__(self):
        self.proc = None

    def start(self):
        self.sr, sw = os.pipe()
        self.out, self.err = os.pipe(), os.pipe()
        # stderr starts as /dev/null: an interactive bash without a
        # terminal says so, and prints a prompt, before INIT runs.
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc", "--noediting", "+m", "-i"], stdin=subprocess.PIPE,
                                     stdout=self.out[1], stderr=subprocess.DEVNULL, pass_fds=(sw, self.err[1]),
                                     process_group=0, env=dict(os.environ), close_fds=True)
        self.line(self.INIT.replace("SW", str(sw)).replace("ERR", str(self.err[1])))
        for fd in (sw, self.out[1], self.err[1]):
            os.close(fd)
        self.buf = b""

    def ensure(self):
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                for fd in (self.out[0], self.err[0], self.sr):
                    os.close(fd)
            self.start()

    def line(self, text):
        self.proc.stdin.write(text.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def status(self, token, wait=None):
        """The status reported for token (lines of earlier tokens are
        dropped); None when wait seconds pass first."""
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                got, self.buf = self.buf[:nl].split(b" "), self.buf[nl + 1:]
                if got[0] == token.encode() and len(got) == 2:
                    return int(got[1] or b"0")
                continue
            if wait is not None and not select.select([self.sr], [], [], wait)[0]:
                return None
            data = os.read(self.sr, 4096)
            if not data:
                self.proc.wait()
                raise SystemExit("bash exited; its variables are gone, the next cell starts a new one")
            self.buf += data

    @staticmethod
    def env_lines(env):
        """Commands that set env for one cell, and those that put back
        what was there before (set or not)."""
        before, after = [], []
        for i, (k, v) in enumerate(sorted(env.items())):
            before.append("__airlock_h%d=${%s+1} __airlock_v%d=${%s-}; export %s=%s;" % (i, k, i, k, k, shlex.quote(v)))
            after.append('if [ -n "$__airlock_h%d" ]; then %s=$__airlock_v%d; else unset %s; fi; unset __airlock_h%d __airlock_v%d;'
                         % (i, k, i, k, i, i))
        return " ".join(before), " ".join(after)

    def run(self, code, token, env):
        """Runs code and returns its exit status; on KeyboardInterrupt
        (the host's SIGINT) interrupts bash's command line and raises
        it once bash has acknowledged."""
        set_env, self.restore = self.env_lines(env)
        b64 = base64.b64encode(code.encode("utf-8")).decode()
        self.line('%s __airlock_c=$(printf %%s %s | base64 -d); eval "$__airlock_c" </dev/null; __airlock_s=$?; %s'
                  'printf "%%s\\n" "%s $__airlock_s" >&3' % (set_env, b64, self.restore, token))
        return self.status(token)

    def interrupt(self, token):
        """Interrupts the running line (its process group: bash and its
        foreground commands) and waits for bash to read on: the
        acknowledgement line, sent again should bash have dropped it
        while being interrupted, puts the cell's environment back."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGINT)
        except OSError:
            return
        while True:
            self.line('%s printf "%%s\\n" "%s 130" >&3' % (self.restore, token))
            try:
                if self.status(token, wait=1.0) is not None:
                    return
            except KeyboardInterrupt:
                pass


bash = Bash()


def check_env(req):
    """The cell's environment (host-checked too): identifiers to strings."""
    env = req.get("env") or {}
    if not isinstance(env, dict):
        raise ValueError("env: want an object")
    for k, v in env.items():
        if not (isinstance(k, str) and isinstance(v, str) and ENV_NAME.match(k) and "\0" not in v):
            raise ValueError("env: bad variable %r" % (k,))
    return env


class cell_env:
    """Sets a cell's environment in os.environ and puts it back after."""

    def __init__(self, env):
        self.env, self.saved = env, {}

    def __enter__(self):
        for k, v in self.env.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v

    def __exit__(self, *exc):
        for k, old in self.saved.items():
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old
        return False


def run_bash(req, count):
    """A bash cell: output streamed (stream) or kept, the exit status an
    error when not 0."""
    global running
    code = req.get("code")
    if not isinstance(code, str):
        raise ValueError("code: want a string")
    env = check_env(req)
    rid = req.get("id")
    reply = {"type": "result", "id": rid, "result": None, "error": None, "images": [], "stdout": "", "stderr": ""}
    bash.ensure()
    token = "c%d" % count
    so, se = Streamer(rid, "stdout", bash.out), Streamer(rid, "stderr", bash.err)
    if not req.get("stream"):
        so.keep, se.keep = [], []
    try:
        running = True
        try:
            st = bash.run(code, token, env)
            if st != 0:
                reply["error"] = {"name": "ExitCodeError", "value": "exit status %d" % st, "traceback": ""}
        except KeyboardInterrupt:
            running = False
            bash.interrupt(token)
            reply["error"] = {"name": "KeyboardInterrupt", "value": "interrupted", "traceback": ""}
        except SystemExit as e:
            reply["error"] = {"name": "KernelDied", "value": str(e), "traceback": ""}
    finally:
        running = False
        so.finish()
        se.finish()
    if not req.get("stream"):
        reply["stdout"] = b"".join(so.keep).decode("utf-8", "replace")
        reply["stderr"] = b"".join(se.keep).decode("utf-8", "replace")
    return reply


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


LANGUAGE = sys.argv[1] if len(sys.argv) > 1 else "python"


def main():
    if LANGUAGE == "bash":
        v = subprocess.run(["bash", "-c", "echo $BASH_VERSION"], capture_output=True, text=True).stdout.strip()
        send({"type": "ready", "language": "bash", "version": v})
    else:
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
            if LANGUAGE == "bash":
                reply = run_bash(req, count)
            else:
                with cell_env(check_env(req)):
                    if req.get("stream"):
                        reply = run_cell_streamed(req, count)
                    else:
                        reply = run_cell(req, count)
        except BaseException as e:
            reply = {"type": "result", "id": None, "stdout": "", "stderr": "", "result": None, "images": [],
                     "error": {"name": "KernelError", "value": clip(str(e), MAX_TEXT)[0], "traceback": ""}}
            if isinstance(req, dict):
                reply["id"] = req.get("id")
        reply["execution_count"] = count
        send(reply)


main()
