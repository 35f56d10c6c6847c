// An agent loop on Airlock: a model picks tools, the sandbox runs them, the
// observations go back to the model, until it answers.
//
// The "model" is a small scripted stand-in (no network, no API key) so the
// example runs anywhere `airlock serve` does; it reacts to what it sees: an
// error makes it inspect the data and fix its code. Replace nextAction with
// a call to your LLM (tool calling) and keep the loop as it is.
//
//   AIRLOCK_HOST=unix:///run/airlock/airlock.sock node examples/typescript/agent_loop.mjs
import { Sandbox } from "@airlock-dev/sdk";

const SALES = "item,qty,unit_price\nbolts,120,0.25\nnuts,300,0.10\ngears,12,7.50\n";

/** Stands in for an LLM: decides the next tool call from the history. */
function nextAction(history) {
  const last = history.at(-1)?.observation;
  if (history.length === 0) return { tool: "write_file", path: "sales.json", content: csvToJson(SALES) };
  if (history.length === 1) {
    // A first attempt that guesses a field name wrong.
    return { tool: "run_code", code: "const rows = JSON.parse(require('fs').readFileSync('sales.json', 'utf8'));\n" +
      "rows.reduce((s, r) => s + r.quantity.valueOf() * r.unit_price, 0)" };
  }
  if (last?.error?.startsWith("TypeError")) return { tool: "run_code", code: "Object.keys(rows[0])" };
  if (last?.result?.startsWith("[")) {
    const qty = JSON.parse(last.result.replaceAll("'", '"')).find((k) => k.startsWith("q"));
    return { tool: "run_code", code: `Math.round(rows.reduce((s, r) => s + r.${qty} * r.unit_price, 0) * 100) / 100` };
  }
  return { tool: "answer", text: `The total revenue is ${last.result}.` };
}

function csvToJson(csv) {
  const [head, ...lines] = csv.trim().split("\n");
  const keys = head.split(",");
  return JSON.stringify(lines.map((l) => Object.fromEntries(l.split(",").map((v, i) => [keys[i], isNaN(+v) ? v : +v]))));
}

/** Executes one tool call in the sandbox and returns the observation. */
async function runTool(sb, action) {
  switch (action.tool) {
    case "write_file":
      await sb.files.write(`${sb.workdir}/${action.path}`, action.content);
      return { ok: true };
    case "run_command": {
      const r = await sb.commands.run(action.command, { cwd: sb.workdir, timeout: 60 });
      return { exit_code: r.exit_code, stdout: r.stdout, stderr: r.stderr };
    }
    case "run_code": {
      // The JavaScript interpreter needs node inside the sandbox.
      const r = await sb.runCode(action.code, { language: "javascript", timeout: 60 });
      return { stdout: r.stdout, result: r.result ?? "", error: r.error && `${r.error.name}: ${r.error.value}` };
    }
  }
  throw new Error(`unknown tool ${action.tool}`);
}

const sb = await Sandbox.create({ timeout: "10m", labels: { example: "agent-loop" } });
try {
  const history = [];
  let answer;
  for (let step = 0; step < 10 && !answer; step++) { // a bound on the loop, as any agent needs
    const action = nextAction(history);
    if (action.tool === "answer") {
      answer = action.text;
      break;
    }
    const observation = await runTool(sb, action);
    console.log(`${action.tool}: ${JSON.stringify(observation).slice(0, 200)}`);
    history.push({ action, observation });
  }
  if (!answer) throw new Error("the agent did not finish in 10 steps");
  console.log(answer);
} finally {
  await sb.kill();
}
