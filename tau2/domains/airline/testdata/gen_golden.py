"""Regenerate the airline golden files from the τ²-bench reference code.

Not run by `go test`. Needs a tau2-bench checkout (a2c0247) importable as
`tau2` (only tau2.environment.{db,toolkit} and tau2.domains.airline.{data_model,
tools} are used; loguru/tau2.utils may be stubbed) and pydantic 2.12+.

    PYTHONPATH=/path/to/stubbed/tau2 python3 gen_golden.py DATA_DIR

For every scenario it builds a fresh AirlineTools over the DB, runs the calls
through τ²'s get_response logic (use_tool, then to_json_str; any exception
becomes "Error: <e>") and records every tool message and the final DB hash.
"""
import json
import sys

from pydantic import BaseModel

from tau2.domains.airline.data_model import FlightDB
from tau2.domains.airline.tools import AirlineTools


def to_json_str(resp):  # tau2 Environment.to_json_str
    def _process(resp):
        if isinstance(resp, BaseModel):
            return resp.model_dump()
        elif isinstance(resp, str):
            return resp
        elif resp is None:
            return resp
        elif isinstance(resp, (int, float, bool)):
            return str(resp)
        elif isinstance(resp, list):
            return [_process(i) for i in resp]
        elif isinstance(resp, tuple):
            return tuple(_process(i) for i in resp)
        elif isinstance(resp, dict):
            return {k: _process(v) for k, v in resp.items()}
        raise ValueError(f"Unsupported type: {type(resp)}")

    if not isinstance(resp, str):
        return json.dumps(_process(resp), default=str)
    return resp


def run(db_path, scenarios_path, out_path):
    scenarios = json.load(open(scenarios_path))
    with open(out_path, "w") as out:
        for sc in scenarios:
            tk = AirlineTools(FlightDB.load(db_path))
            results = []
            for name, args in sc["calls"]:
                try:
                    content, error = to_json_str(tk.use_tool(name, **json.loads(args))), False
                except Exception as e:
                    content, error = f"Error: {e}", True
                results.append({"content": content, "error": error})
            out.write(json.dumps({"name": sc["name"], "results": results, "db_hash": tk.get_db_hash()}) + "\n")


def gold_replay(db_path, tasks_path):
    """Replay every task's gold actions like τ²'s EnvironmentEvaluator
    (make_tool_call, exceptions ignored); record the DB hash and which
    actions raised."""
    out = {}
    for task in json.load(open(tasks_path)):
        tk = AirlineTools(FlightDB.load(db_path))
        errors = []
        actions = (task.get("evaluation_criteria") or {}).get("actions") or []
        for i, a in enumerate(actions):
            try:
                tk.use_tool(a["name"], **a["arguments"])
            except Exception:
                errors.append(i)
        out[task["id"]] = {"db_hash": tk.get_db_hash(), "error_actions": errors}
    return out


if __name__ == "__main__":
    data = sys.argv[1]
    run("fixture_db.json", "scenarios_fixture.json", "golden/fixture.jsonl")
    db = f"{data}/tau2/domains/airline/db.json"
    run(db, "scenarios_real.json", "golden/real.jsonl")
    replay = {
        "head": gold_replay(db, f"{data}/tau2/domains/airline/tasks.json"),
        "v0.2.1": gold_replay(db, f"{data}/_versions/v0.2.1-0ed2fd8/tau2/domains/airline/tasks.json"),
    }
    with open("golden/gold_replay.json", "w") as f:
        json.dump(replay, f, indent=1, sort_keys=True)
