"""The Python SDK against a real `airlock serve` with the native backend."""

import asyncio
import os
import tempfile
import time
import unittest

from tests import _serve  # noqa: F401  (puts the SDK on sys.path)
from tests._serve import require, sandbox_has, server

import airlock
from airlock import AsyncSandbox, Sandbox


class SandboxTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.host = server()

    def test_lifecycle(self):
        with Sandbox.create(labels={"suite": "python"}, timeout=300) as sb:
            self.assertTrue(sb.id.startswith("sb-"))
            self.assertTrue(sb.workdir)
            ids = [s.id for s in Sandbox.list(labels={"suite": "python"})]
            self.assertIn(sb.id, ids)
            info = sb.info()
            self.assertEqual(info.state, "running")
            self.assertIsNotNone(info.stats)
            again = Sandbox.connect(sb.id)
            self.assertEqual(again.workdir, sb.workdir)
        self.assertNotIn(sb.id, [s.id for s in Sandbox.list()])
        with self.assertRaises(airlock.NotFoundError):
            Sandbox.connect("sb-does-not-exist")

    def test_commands(self):
        with Sandbox.create(env={"WHO": "sdk"}) as sb:
            r = sb.commands.run("echo hello $WHO; echo oops >&2; exit 3")
            self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, "hello sdk\n", "oops\n"))
            r = sb.commands.run(["pwd"], cwd="/tmp")
            self.assertEqual(r.stdout, "/tmp\n")
            r = sb.commands.run("cat", stdin="piped\n")
            self.assertEqual(r.stdout, "piped\n")

            out, err = [], []
            r = sb.commands.run("for i in 1 2 3; do echo line $i; done; echo e >&2",
                                on_stdout=out.append, on_stderr=err.append)
            self.assertEqual("".join(out), "line 1\nline 2\nline 3\n")
            self.assertEqual(r.stdout, "line 1\nline 2\nline 3\n")
            self.assertEqual("".join(err), "e\n")

            with self.assertRaises(airlock.CommandExitError) as ctx:
                sb.commands.run("false", check=True)
            self.assertEqual(ctx.exception.result.exit_code, 1)

            r = sb.commands.run("sleep 5", timeout=0.5)
            self.assertTrue(r.timed_out)

            with self.assertRaises(airlock.NotFoundError):
                sb.commands.run(["no-such-command-here"])

    def test_background(self):
        with Sandbox.create() as sb:
            h = sb.commands.run("read line; echo got $line; echo warn >&2", background=True, stdin=True)
            self.assertTrue(h.id)
            self.assertIn(h.id, [p.id for p in sb.commands.list()])
            h.send_stdin("ping\n")
            seen = []
            r = h.wait(on_stdout=seen.append)
            self.assertEqual(r.exit_code, 0)
            self.assertEqual(r.stdout, "got ping\n")
            self.assertEqual(r.stderr, "warn\n")
            self.assertEqual("".join(seen), "got ping\n")

            h = sb.commands.run("sleep 60", background=True)
            h.kill()
            info = sb.commands.wait(h.id, timeout=30)
            self.assertFalse(info.running)
            self.assertEqual(info.exit.signal, 9)

    def test_files(self):
        d0 = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, d0)
        with Sandbox.create() as sb:
            path = sb.workdir + "/dir/a.txt"
            sb.files.write(path, "héllo\n")
            self.assertEqual(sb.files.read(path), "héllo\n")
            sb.files.write("/tmp/bin", bytes(range(256)), mode=0o600)
            self.assertEqual(sb.files.read("/tmp/bin", format="bytes"), bytes(range(256)))
            self.assertEqual(sb.files.stat("/tmp/bin").size, 256)
            self.assertEqual([f.name for f in sb.files.list(sb.workdir + "/dir")], ["a.txt"])
            sb.files.rename(path, sb.workdir + "/dir/b.txt")
            self.assertFalse(sb.files.exists(path))
            self.assertTrue(sb.files.exists(sb.workdir + "/dir/b.txt"))
            sb.files.make_dir("/tmp/x/y")
            self.assertTrue(sb.files.stat("/tmp/x/y").is_dir)
            sb.files.remove("/tmp/x", recursive=True)
            self.assertFalse(sb.files.exists("/tmp/x"))

            with tempfile.TemporaryDirectory() as d:
                os.makedirs(os.path.join(d, "src", "pkg"))
                with open(os.path.join(d, "src", "pkg", "m.py"), "w") as f:
                    f.write("X = 1\n")
                with open(os.path.join(d, "one.txt"), "w") as f:
                    f.write("single")
                sb.files.upload(os.path.join(d, "src"), "/tmp/up")
                sb.files.upload(os.path.join(d, "one.txt"), "/tmp/one.txt")
                self.assertEqual(sb.files.read("/tmp/up/pkg/m.py"), "X = 1\n")
                sb.files.download("/tmp/up", os.path.join(d, "back"))
                with open(os.path.join(d, "back", "pkg", "m.py")) as f:
                    self.assertEqual(f.read(), "X = 1\n")
                sb.files.download("/tmp/one.txt", os.path.join(d, "one-back.txt"))
                with open(os.path.join(d, "one-back.txt")) as f:
                    self.assertEqual(f.read(), "single")

            # Relative paths are refused by the SDK itself (status 0: no
            # request), naming the path.
            for call in (lambda: sb.files.read("relative/path"), lambda: sb.files.write("a.txt", "x"),
                         lambda: sb.files.rename("/tmp/a", "b"), lambda: sb.files.make_dir("d"),
                         lambda: sb.files.list("."), lambda: sb.files.exists("x"),
                         lambda: sb.files.upload(d0, "up")):
                with self.assertRaises(airlock.InvalidError) as ctx:
                    call()
                self.assertEqual(ctx.exception.status, 0)
                self.assertIn("must be absolute inside the sandbox", str(ctx.exception))
            with self.assertRaises(airlock.PermissionDeniedError):
                sb.files.write("/etc/evil", "x")
            with self.assertRaises(airlock.NotFoundError):
                sb.files.read("/tmp/nothing-here")

    def test_run_code(self):
        with Sandbox.create() as sb:
            r = sb.run_code("import math\nradius = 3")
            self.assertTrue(r.new_interpreter)
            self.assertIsNone(r.result)
            r = sb.run_code("print('area')\nround(math.pi * radius ** 2, 1)")
            self.assertEqual((r.stdout, r.text, r.error), ("area\n", "28.3", None))
            r = sb.run_code("undefined_name")
            self.assertEqual(r.error.name, "NameError")
            self.assertIn("undefined_name", r.error.traceback)
            r = sb.run_code("while True: pass", timeout=1)
            self.assertEqual(r.error.name, "TimeoutError")
            self.assertEqual(sb.run_code("radius").text, "3")
            with self.assertRaises(airlock.InvalidError):
                sb.run_code("1", language="fortran")
            if sandbox_has(sb, "matplotlib") or require(False, "matplotlib missing in the sandbox (python3-matplotlib)"):
                r = sb.run_code("import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [3, 5])")
                self.assertEqual(len(r.images), 1)
                self.assertTrue(r.images[0].bytes.startswith(b"\x89PNG"))

    def test_events(self):
        with Sandbox.create() as sb:
            sb.commands.run("true")
            types = {e.type for e in sb.events()}
            self.assertIn("exec", types)

    def test_access_token_and_create_options(self):
        with Sandbox.create(public_ports=True, on_timeout="pause", env={"GREETING": "hi"}) as sb:
            info = sb.info()
            self.assertEqual((info.public_ports, info.on_timeout, info.env.get("GREETING")), (True, "pause", "hi"))
            tok = sb.access_token()
            self.assertTrue(tok)
            self.assertEqual(sb.access_token(), tok)  # deterministic: nothing stored
            self.assertNotEqual(sb.access_token("ports"), tok)
            with self.assertRaises(airlock.InvalidError):
                sb.access_token("everything")

    def test_url(self):
        with Sandbox.create() as sb:
            sb.files.write("/tmp/site/index.html", "hello through the port route\n")
            sb.commands.run("python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/site", background=True)
            url = sb.url(8000)
            self.assertTrue(url.endswith(f"/v1/sandboxes/{sb.id}/ports/8000/"))
            path = url[len(sb._t.base_url()):] + "index.html"
            deadline = time.monotonic() + 30
            while True:
                conn = sb._t._connection(10)
                conn.request("GET", path)
                resp = conn.getresponse()
                body = resp.read()
                conn.close()
                if resp.status == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            self.assertEqual((resp.status, body), (200, b"hello through the port route\n"))
            tok = sb.port_token(8000, ttl=60)
            self.assertIn("token=" + tok["token"], tok["url"])
            conn = sb._t._connection(10)
            conn.request("GET", "/v1/sandboxes/%s/ports/8000/index.html?token=x.y.z.w" % sb.id)
            self.assertEqual(conn.getresponse().status, 401)
            conn.close()

    def test_checkpoint_rollback_pause_resume(self):
        # A pausable sandbox: native, no image, its workspace on a disk
        # volume of its own (limits.disk).
        with Sandbox.create(policy={"limits": {"disk": "256Mi"}}, timeout=300) as sb:
            path = sb.workdir + "/notes/plan.txt"
            sb.files.write(path, "step 1\n")
            cp = sb.checkpoint("plan written")
            self.assertTrue(cp.id.startswith("cp-"), cp)
            self.assertEqual((cp.sandbox, cp.name, len(cp.manifest_sha256)), (sb.id, "plan written", 64))
            self.assertGreaterEqual(cp.bytes, len("step 1\n"))
            self.assertEqual([c.id for c in sb.checkpoints()], [cp.id])
            self.assertEqual([c.id for c in asyncio.run(AsyncSandbox(sb).checkpoints())], [cp.id])

            sb.commands.run(["rm", "-r", sb.workdir + "/notes"], check=True)
            self.assertFalse(sb.files.exists(path))
            info = sb.rollback(cp)
            self.assertEqual((info.id, info.state), (sb.id, "running"))
            self.assertEqual(sb.files.read(path), "step 1\n")

            p = sb.pause()
            self.assertEqual((p.id, p.state), (sb.id, "paused"))
            self.assertEqual(sb.pause().state, "paused")  # a no-op
            # No auto_resume: 409 conflict naming the pause, not 404.
            with self.assertRaises(airlock.ConflictError) as ctx:
                sb.files.read(path)
            self.assertEqual((ctx.exception.status, ctx.exception.code), (409, "conflict"))
            self.assertIn("is paused; resume it", ctx.exception.message)
            with self.assertRaises(airlock.ConflictError):
                sb.commands.run("true")
            r = sb.resume()
            self.assertEqual((r.id, r.state, r.verified), (sb.id, "running", True))
            self.assertEqual(sb.files.read(path), "step 1\n")

            # memory=True freezes it in place: requests are refused (409
            # conflict) until resume thaws it.
            self.assertEqual(sb.pause(memory=True).state, "frozen")
            with self.assertRaises(airlock.ConflictError) as ctx:
                sb.commands.run("true")
            self.assertEqual(ctx.exception.code, "conflict")
            self.assertEqual(sb.resume().state, "running")
            self.assertEqual(sb.commands.run(["cat", path]).stdout, "step 1\n")

            sb.delete_checkpoint(cp.id)
            self.assertEqual(sb.checkpoints(), [])
            with self.assertRaises(airlock.NotFoundError):
                sb.rollback(cp.id)

        # auto_resume: a request to a paused sandbox resumes it first.
        with Sandbox.create(policy={"limits": {"disk": "256Mi"}}, auto_resume=True,
                            keep_alive={"while": "processes", "idle": 30}) as sb:
            info = sb.info()
            self.assertEqual((info.auto_resume, info.keep_alive_while), (True, "processes"))
            sb.files.write(sb.workdir + "/kept.txt", "kept\n")
            self.assertEqual(sb.pause().state, "paused")
            self.assertEqual(sb.files.read(sb.workdir + "/kept.txt"), "kept\n")
            self.assertEqual(sb.info().state, "running")

    def test_async(self):
        async def main():
            async with await AsyncSandbox.create() as sb:
                seen = []
                r = await sb.commands.run("echo async", on_stdout=seen.append)
                self.assertEqual(r.stdout, "async\n")
                self.assertEqual("".join(seen), "async\n")
                await sb.files.write("/tmp/a", "x")
                self.assertEqual(await sb.files.read("/tmp/a"), "x")
                results = await asyncio.gather(*(sb.commands.run(f"echo {i}") for i in range(3)))
                self.assertEqual([x.stdout for x in results], ["0\n", "1\n", "2\n"])
                self.assertEqual((await sb.run_code("6*7")).text, "42")
                h = await sb.commands.run("echo bg", background=True)
                self.assertEqual((await h.wait()).stdout, "bg\n")
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
