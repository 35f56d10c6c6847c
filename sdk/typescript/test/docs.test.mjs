// The README's TypeScript example and examples/typescript run exactly as
// written (with the SDK resolvable as "@airlock-dev/sdk"), against a real
// airlock serve.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";

import { available, ROOT, startServer, unavailable } from "./_serve.mjs";

const run = promisify(execFile);

/** The code block after <!-- readme-test: LANG --> in README.md (or file). */
function readmeBlock(lang, file = join(ROOT, "README.md")) {
  const text = readFileSync(file, "utf8");
  const m = new RegExp("<!-- readme-test: " + lang + " -->\\n```\\w+\\n([\\s\\S]*?)\\n```").exec(text);
  assert.ok(m, `README.md has no ${lang} example marked readme-test`);
  return m[1] + "\n";
}

/** A directory where "@airlock-dev/sdk" resolves to this SDK. */
function project() {
  const d = mkdtempSync(join(tmpdir(), "airlock-ts-docs-"));
  mkdirSync(join(d, "node_modules", "@airlock-dev"), { recursive: true });
  symlinkSync(join(ROOT, "sdk", "typescript"), join(d, "node_modules", "@airlock-dev", "sdk"));
  return d;
}

let server;

describe("docs", () => {
  before(async () => {
    if (!unavailable()) server = await startServer();
  });
  after(async () => server?.stop());

  test("README TypeScript example", async (t) => {
    if (!available(t)) return;
    const code = readmeBlock("typescript");
    assert.ok(code.trim().split("\n").length <= 10, "the README example is meant to be short");
    const d = project();
    try {
      writeFileSync(join(d, "readme.mjs"), code);
      const { stdout } = await run(process.execPath, [join(d, "readme.mjs")], { cwd: d, timeout: 300_000 });
      assert.equal(stdout, "3 data.csv\nsum of y: 6\n");
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });

  // The SDK's own README: as written, on the Node it runs on (20 in CI,
  // the oldest it supports, which has no `await using`).
  test("SDK README example", async (t) => {
    if (!available(t)) return;
    const code = readmeBlock("typescript", join(ROOT, "sdk", "typescript", "README.md"));
    const d = project();
    try {
      writeFileSync(join(d, "readme.mjs"), code);
      const { stdout } = await run(process.execPath, [join(d, "readme.mjs")], { cwd: d, timeout: 300_000 });
      assert.equal(stdout, "0 42\nbuilt\n42 no error\n");
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });

  test("examples/typescript agent loop", async (t) => {
    if (!available(t)) return;
    const d = project();
    try {
      copyFileSync(join(ROOT, "examples", "typescript", "agent_loop.mjs"), join(d, "agent_loop.mjs"));
      const { stdout } = await run(process.execPath, [join(d, "agent_loop.mjs")], { cwd: d, timeout: 300_000 });
      assert.match(stdout, /TypeError/); // the stand-in model's first try fails ...
      assert.match(stdout, /The total revenue is 150\.\n$/); // ... and it recovers
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });
});
