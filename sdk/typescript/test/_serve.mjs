// Starts one real `airlock serve` (the binary built from this tree,
// $AIRLOCK_BIN) per test file on a private socket, and stops it after.
// Where it cannot run (not Linux, not root, no binary) the tests skip --
// except in CI (CI=true), where a skip would hide a failure: they fail.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { Sandbox } from "../dist/index.js";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const BIN = process.env.AIRLOCK_BIN || join(ROOT, "bin", "airlock");

/** Why the tests cannot run here ("" when they can). */
export function unavailable() {
  if (process.platform !== "linux") return "needs Linux";
  if (process.geteuid() !== 0) return "needs root (the native backend)";
  if (!existsSync(BIN)) return `no airlock binary at ${BIN} (make build)`;
  return "";
}

/** Skips t (or fails it in CI) when the server cannot run; true when it can. */
export function available(t) {
  const why = unavailable();
  if (!why) return true;
  if (process.env.CI) throw new Error(`required in CI but unavailable: ${why}`);
  t.skip(why);
  return false;
}

/** Skips (or fails in CI) when cond is false. */
export function requireOrSkip(t, cond, reason) {
  if (cond) return true;
  if (process.env.CI) throw new Error(`required in CI but unavailable: ${reason}`);
  t.skip(reason);
  return false;
}

/** Starts a server; returns { host, stop }. */
export async function startServer() {
  const dir = mkdtempSync(join(tmpdir(), "airlock-tssdk-"));
  const sock = join(dir, "airlock.sock");
  const logPath = join(dir, "serve.log");
  const log = openSync(logPath, "a");
  const p = spawn(BIN, ["serve", "--socket", sock, "--data", join(dir, "data"), "--backend", "native"], {
    stdio: ["ignore", log, log],
  });
  let exited = false;
  p.on("exit", () => (exited = true));
  const host = "unix://" + sock;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited) throw new Error("airlock serve exited: " + readFileSync(logPath, "utf8").slice(-4000));
    try {
      await Sandbox.health({ host });
      break;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  process.env.AIRLOCK_HOST = host;
  const stop = async () => {
    if (!exited) {
      const done = new Promise((r) => p.on("exit", r));
      p.kill("SIGTERM");
      await done;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return { host, stop };
}
