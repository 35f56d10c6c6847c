// The TypeScript SDK against a real `airlock serve` with the native backend.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import {
  CommandExitError, ConflictError, InvalidError, NotFoundError, PermissionDeniedError, Sandbox, withSandbox,
} from "../dist/index.js";
import { available, requireOrSkip, startServer, unavailable } from "./_serve.mjs";

let server;

describe("sdk against airlock serve", () => {
  before(async () => {
    if (!unavailable()) server = await startServer();
  });
  after(async () => server?.stop());

  test("lifecycle", async (t) => {
    if (!available(t)) return;
    const sb = await Sandbox.create({ labels: { suite: "ts" }, timeout: 300 });
    assert.match(sb.id, /^sb-/);
    assert.ok(sb.workdir);
    assert.ok((await Sandbox.list({ labels: { suite: "ts" } })).some((s) => s.id === sb.id));
    const info = await sb.info();
    assert.equal(info.state, "running");
    assert.equal((await Sandbox.connect(sb.id)).workdir, sb.workdir);
    await sb.kill();
    await sb.kill(); // idempotent
    assert.ok(!(await Sandbox.list()).some((s) => s.id === sb.id));
    await assert.rejects(Sandbox.connect("sb-does-not-exist"), NotFoundError);
    // `await using sb = await Sandbox.create()` (TypeScript 5.2+) calls this.
    const disposable = await Sandbox.create();
    await disposable[Symbol.asyncDispose]();
    assert.equal((await disposable.info()).state, "stopped");
  });

  test("commands", async (t) => {
    if (!available(t)) return;
    await withSandbox({ env: { WHO: "ts" } }, async (sb) => {
      let r = await sb.commands.run("echo hello $WHO; echo oops >&2; exit 3");
      assert.deepEqual([r.exit_code, r.stdout, r.stderr], [3, "hello ts\n", "oops\n"]);
      r = await sb.commands.run(["pwd"], { cwd: "/tmp" });
      assert.equal(r.stdout, "/tmp\n");
      r = await sb.commands.run("cat", { stdin: "piped\n" });
      assert.equal(r.stdout, "piped\n");
      const out = [];
      const err = [];
      r = await sb.commands.run("for i in 1 2 3; do echo line $i; done; echo e >&2", {
        onStdout: (s) => out.push(s), onStderr: (s) => err.push(s),
      });
      assert.equal(out.join(""), "line 1\nline 2\nline 3\n");
      assert.equal(r.stdout, "line 1\nline 2\nline 3\n");
      assert.equal(err.join(""), "e\n");
      await assert.rejects(sb.commands.run("false", { check: true }), CommandExitError);
      r = await sb.commands.run("sleep 5", { timeout: 0.5 });
      assert.equal(r.timed_out, true);
      await assert.rejects(sb.commands.run(["no-such-command-here"]), NotFoundError);
    });
  });

  test("background", async (t) => {
    if (!available(t)) return;
    await withSandbox({}, async (sb) => {
      const h = await sb.commands.run("read line; echo got $line; echo warn >&2", { background: true, stdin: true });
      assert.ok((await sb.commands.list()).some((p) => p.id === h.id));
      await h.sendStdin("ping\n");
      const seen = [];
      const r = await h.wait({ onStdout: (s) => seen.push(s) });
      assert.deepEqual([r.exit_code, r.stdout, r.stderr, seen.join("")], [0, "got ping\n", "warn\n", "got ping\n"]);
      const long = await sb.commands.run("sleep 60", { background: true });
      await long.kill();
      const info = await sb.commands.wait(long.id, 30);
      assert.equal(info.running, false);
      assert.equal(info.exit?.signal, 9);
    });
  });

  test("files", async (t) => {
    if (!available(t)) return;
    await withSandbox({}, async (sb) => {
      const p = sb.workdir + "/dir/a.txt";
      await sb.files.write(p, "héllo\n");
      assert.equal(await sb.files.read(p), "héllo\n");
      const bin = Uint8Array.from({ length: 256 }, (_, i) => i);
      await sb.files.write("/tmp/bin", bin, { mode: 0o600 });
      assert.deepEqual(await sb.files.read("/tmp/bin", { format: "bytes" }), bin);
      assert.equal((await sb.files.stat("/tmp/bin")).size, 256);
      assert.deepEqual((await sb.files.list(sb.workdir + "/dir")).map((f) => f.name), ["a.txt"]);
      await sb.files.rename(p, sb.workdir + "/dir/b.txt");
      assert.equal(await sb.files.exists(p), false);
      await sb.files.makeDir("/tmp/x/y");
      assert.equal((await sb.files.stat("/tmp/x/y")).is_dir, true);
      await sb.files.remove("/tmp/x", { recursive: true });
      assert.equal(await sb.files.exists("/tmp/x"), false);

      const d = mkdtempSync(join(tmpdir(), "airlock-ts-files-"));
      try {
        mkdirSync(join(d, "src", "pkg"), { recursive: true });
        writeFileSync(join(d, "src", "pkg", "m.js"), "export const X = 1;\n");
        writeFileSync(join(d, "one.txt"), "single");
        await sb.files.upload(join(d, "src"), "/tmp/up");
        await sb.files.upload(join(d, "one.txt"), "/tmp/one.txt");
        assert.equal(await sb.files.read("/tmp/up/pkg/m.js"), "export const X = 1;\n");
        await sb.files.download("/tmp/up", join(d, "back"));
        assert.equal(readFileSync(join(d, "back", "pkg", "m.js"), "utf8"), "export const X = 1;\n");
        await sb.files.download("/tmp/one.txt", join(d, "one-back.txt"));
        assert.equal(readFileSync(join(d, "one-back.txt"), "utf8"), "single");
      } finally {
        rmSync(d, { recursive: true, force: true });
      }
      // Relative paths are refused by the SDK itself (status 0: no request), naming the path.
      for (const call of [() => sb.files.read("relative/path"), () => sb.files.write("a.txt", "x"), () => sb.files.rename("/tmp/a", "b"),
        () => sb.files.makeDir("d"), () => sb.files.list("."), () => sb.files.exists("x"), () => sb.files.upload(".", "up")]) {
        await assert.rejects(call(), (e) => e instanceof InvalidError && e.status === 0 && /must be absolute inside the sandbox/.test(e.message));
      }
      await assert.rejects(sb.files.write("/etc/evil", "x"), PermissionDeniedError);
      await assert.rejects(sb.files.read("/tmp/nothing-here"), NotFoundError);
    });
  });

  test("runCode", async (t) => {
    if (!available(t)) return;
    await withSandbox({}, async (sb) => {
      let r = await sb.runCode("import math\nradius = 3");
      assert.equal(r.new_interpreter, true);
      r = await sb.runCode("print('area')\nround(math.pi * radius ** 2, 1)");
      assert.deepEqual([r.stdout, r.result, r.error], ["area\n", "28.3", undefined]);
      r = await sb.runCode("undefined_name");
      assert.equal(r.error?.name, "NameError");
      r = await sb.runCode("while True: pass", { timeout: 1 });
      assert.equal(r.error?.name, "TimeoutError");
      assert.equal((await sb.runCode("radius")).result, "3");
      await assert.rejects(sb.runCode("1", { language: "fortran" }), InvalidError);
      const js = await sb.runCode("const k = 6; k * 7", { language: "javascript" });
      assert.equal(js.result, "42");
      const mpl = await sb.commands.run(["python3", "-c", "import matplotlib"]);
      if (requireOrSkip(t, mpl.exit_code === 0, "matplotlib missing in the sandbox (python3-matplotlib)")) {
        r = await sb.runCode("import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [3, 5])");
        assert.equal(r.images?.length, 1);
        assert.ok(Buffer.from(r.images[0].data, "base64").subarray(0, 4).equals(Buffer.from("\x89PNG", "latin1")));
      }
    });
  });

  test("events", async (t) => {
    if (!available(t)) return;
    await withSandbox({}, async (sb) => {
      await sb.commands.run("true");
      assert.ok((await sb.events()).some((e) => e.type === "exec"));
    });
  });

  test("access token and create options", async (t) => {
    if (!available(t)) return;
    await withSandbox({ publicPorts: true, onTimeout: "pause", env: { GREETING: "hi" } }, async (sb) => {
      const info = await sb.info();
      assert.deepEqual([info.public_ports, info.on_timeout, info.env?.GREETING], [true, "pause", "hi"]);
      const tok = await sb.accessToken();
      assert.ok(tok);
      assert.equal(await sb.accessToken(), tok); // deterministic: nothing stored
      assert.notEqual(await sb.accessToken("ports"), tok);
      await assert.rejects(sb.accessToken("everything"), /scope/);
    });
  });

  test("checkpoint, rollback, pause, resume", async (t) => {
    if (!available(t)) return;
    // A pausable sandbox: native, no image, its workspace on a disk volume
    // of its own (limits.disk).
    await withSandbox({ policy: { limits: { disk: "256Mi" } }, timeout: 300 }, async (sb) => {
      const p = sb.workdir + "/notes/plan.txt";
      await sb.files.write(p, "step 1\n");
      const cp = await sb.checkpoint("plan written");
      assert.match(cp.id, /^cp-/);
      assert.deepEqual([cp.sandbox, cp.name, cp.manifest_sha256.length], [sb.id, "plan written", 64]);
      assert.ok(cp.bytes >= "step 1\n".length, JSON.stringify(cp));
      assert.deepEqual((await sb.checkpoints()).map((c) => c.id), [cp.id]);

      await sb.commands.run(["rm", "-r", sb.workdir + "/notes"], { check: true });
      assert.equal(await sb.files.exists(p), false);
      const info = await sb.rollback(cp);
      assert.deepEqual([info.id, info.state], [sb.id, "running"]);
      assert.equal(await sb.files.read(p), "step 1\n");

      const paused = await sb.pause();
      assert.deepEqual([paused.id, paused.state], [sb.id, "paused"]);
      assert.equal((await sb.pause()).state, "paused"); // a no-op
      // No autoResume: 409 conflict naming the pause, not 404.
      await assert.rejects(sb.files.read(p), (e) => e instanceof ConflictError && e.status === 409 && /is paused; resume it/.test(e.message));
      await assert.rejects(sb.commands.run("true"), (e) => e instanceof ConflictError && /is paused; resume it/.test(e.message));
      const resumed = await sb.resume();
      assert.deepEqual([resumed.id, resumed.state, resumed.verified], [sb.id, "running", true]);
      assert.equal(await sb.files.read(p), "step 1\n");

      // memory: true freezes it in place: requests are refused (409
      // conflict) until resume thaws it.
      assert.equal((await sb.pause({ memory: true })).state, "frozen");
      await assert.rejects(sb.commands.run("true"), (e) => e instanceof ConflictError && e.code === "conflict");
      assert.equal((await sb.resume()).state, "running");
      assert.equal((await sb.commands.run(["cat", p])).stdout, "step 1\n");

      await sb.deleteCheckpoint(cp.id);
      assert.deepEqual(await sb.checkpoints(), []);
      await assert.rejects(sb.rollback(cp.id), NotFoundError);
    });
    // autoResume: a request to a paused sandbox resumes it first.
    const opts = { policy: { limits: { disk: "256Mi" } }, autoResume: true, keepAlive: { while: "processes", idle: 30 } };
    await withSandbox(opts, async (sb) => {
      const info = await sb.info();
      assert.deepEqual([info.auto_resume, info.keep_alive_while], [true, "processes"]);
      await sb.files.write(sb.workdir + "/kept.txt", "kept\n");
      assert.equal((await sb.pause()).state, "paused");
      assert.equal(await sb.files.read(sb.workdir + "/kept.txt"), "kept\n");
      assert.equal((await sb.info()).state, "running");
    });
  });

  test("url", async (t) => {
    if (!available(t)) return;
    await withSandbox({}, async (sb) => {
      await sb.files.write("/tmp/site/index.html", "hello through the port route\n");
      await sb.commands.run("python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/site", { background: true });
      const url = sb.url(8000);
      assert.ok(url.endsWith(`/v1/sandboxes/${sb.id}/ports/8000/`), url);
      let resp;
      for (const deadline = Date.now() + 30000; ;) {
        resp = await sb.transport.fetchURL(url + "index.html");
        if (resp.status === 200 || Date.now() > deadline) break;
        await resp.arrayBuffer();
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(resp.status, 200);
      assert.equal(await resp.text(), "hello through the port route\n");
      const tok = await sb.portToken(8000, { ttl: 60 });
      assert.ok(tok.url.includes("token=" + tok.token), tok.url);
      const bad = await sb.transport.fetchURL(url + "index.html?token=x.y.z.w");
      assert.equal(bad.status, 401);
    });
  });
});
