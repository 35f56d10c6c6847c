"""An agent loop on Airlock: a model picks tools, the sandbox runs them,
the observations go back to the model, until it answers.

The "model" here is a small scripted stand-in (no network, no API key), so
the example runs anywhere `airlock serve` does; it reacts to what it sees --
an error makes it inspect the data and fix its code. Replace
ScriptedModel.next_action with a call to your LLM (tool calling) and keep
the loop as it is.

    AIRLOCK_HOST=unix:///run/airlock/airlock.sock python3 examples/python/agent_loop.py
"""

import json
from typing import Any, Dict, List

from airlock import Sandbox

TASK = "What is the total revenue in sales.csv (quantity times unit price)?"
SALES = "item,qty,unit_price\nbolts,120,0.25\nnuts,300,0.10\ngears,12,7.50\n"


class ScriptedModel:
    """Stands in for an LLM: decides the next tool call from the history."""

    def next_action(self, history: List[Dict[str, Any]]) -> Dict[str, Any]:
        last = history[-1]["observation"] if history else None
        step = len(history)
        if step == 0:
            return {"tool": "write_file", "path": "sales.csv", "content": SALES}
        if step == 1:
            # A first attempt that guesses a column name wrong.
            return {"tool": "run_code", "code": "import csv\nrows = list(csv.DictReader(open('sales.csv')))\n"
                                                "sum(int(r['quantity']) * float(r['unit_price']) for r in rows)"}
        if last and last.get("error"):
            if "KeyError" in last["error"]:
                return {"tool": "run_code", "code": "list(rows[0].keys())"}
        if last and last.get("result", "").startswith("["):
            columns = json.loads(last["result"].replace("'", '"'))
            qty = next(c for c in columns if c.startswith("q"))
            return {"tool": "run_code", "code": f"round(sum(int(r['{qty}']) * float(r['unit_price']) for r in rows), 2)"}
        return {"tool": "answer", "text": f"The total revenue is {last['result']}."}


def run_tool(sb: Sandbox, action: Dict[str, Any]) -> Dict[str, Any]:
    """Executes one tool call in the sandbox and returns the observation."""
    if action["tool"] == "write_file":
        sb.files.write(f"{sb.workdir}/{action['path']}", action["content"])
        return {"ok": True}
    if action["tool"] == "run_command":
        r = sb.commands.run(action["command"], cwd=sb.workdir, timeout=60)
        return {"exit_code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr}
    if action["tool"] == "run_code":
        r = sb.run_code(action["code"], timeout=60)
        obs: Dict[str, Any] = {"stdout": r.stdout, "result": r.result or ""}
        if r.error:
            obs["error"] = f"{r.error.name}: {r.error.value}"
        return obs
    raise ValueError(f"unknown tool {action['tool']}")


def main() -> str:
    model = ScriptedModel()
    history: List[Dict[str, Any]] = []
    with Sandbox.create(timeout="10m", labels={"example": "agent-loop"}) as sb:
        for _ in range(10):  # a bound on the loop, as any agent needs
            action = model.next_action(history)
            if action["tool"] == "answer":
                print(action["text"])
                return action["text"]
            observation = run_tool(sb, action)
            print(f"{action['tool']}: {json.dumps(observation)[:200]}")
            history.append({"action": action, "observation": observation})
    raise SystemExit("the agent did not finish in 10 steps")


if __name__ == "__main__":
    main()
