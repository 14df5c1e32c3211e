# Usage: harness.py ORACLE_WORKDIR TESTDATA_DIR DATA_DIR (see setup.sh).
# Oracle: runs testdata/scenarios.json through τ²'s own RetailTools with
# τ²'s get_response logic (use_tool, exceptions become "Error: <e>",
# to_json_str copied from environment.py) and replays every retail task's
# gold actions like τ²'s EnvironmentEvaluator (make_tool_call, exceptions
# ignored); writes testdata/golden/{scenarios.jsonl,gold_replay.json}.
import hashlib
import json
import sys

sys.path.insert(0, sys.argv[1])
from pydantic import BaseModel  # noqa: E402

from tau2.domains.retail.data_model import RetailDB  # noqa: E402
from tau2.domains.retail.tools import RetailTools  # noqa: E402

testdata, data = sys.argv[2], sys.argv[3]
retail_dir = f"{data}/tau2/domains/retail"


def to_json_str(resp):
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


def call(tk, name, args):
    try:
        return to_json_str(tk.use_tool(name, **args)), False
    except Exception as e:
        return f"Error: {e}", True


dbs = {"fixture": f"{testdata}/fixture_db.json", "real": f"{retail_dir}/db.json"}
loaded = {}


def merge(dst, src):  # addict.Dict.update, as τ²'s update_pydantic_model_with_dict uses it
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            merge(dst[k], v)
        else:
            dst[k] = v


def fresh(which, agent_data=None):
    if which not in loaded:
        with open(dbs[which]) as f:
            loaded[which] = json.load(f)
    db = RetailDB.model_validate(loaded[which])
    if agent_data is not None:  # Environment.set_state's initialization_data
        dump = db.model_dump()
        merge(dump, agent_data)
        db = RetailDB.model_validate(dump)
    return RetailTools(db)


with open(f"{testdata}/scenarios.json") as f:
    scenarios = json.load(f)
with open(f"{testdata}/golden/scenarios.jsonl", "w") as out:
    for sc in scenarios:
        tk = fresh(sc["db"], sc.get("agent_data"))
        results = []
        for name, args in sc["calls"]:
            content, error = call(tk, name, json.loads(args))
            results.append({"content": content, "error": error})
        out.write(json.dumps({"name": sc["name"], "results": results, "db_hash": tk.get_db_hash()}) + "\n")


def gold_replay(tasks_path):
    out = {}
    with open(tasks_path) as f:
        tasks = json.load(f)
    for task in tasks:
        tk = fresh("real")
        errors, outputs = [], []
        actions = (task.get("evaluation_criteria") or {}).get("actions") or []
        for i, a in enumerate(actions):
            try:
                content, error = to_json_str(tk.use_tool(a["name"], **a["arguments"])), False
            except Exception as e:
                content, error = f"Error: {e}", True
                errors.append(i)
            outputs.append([content, error])
        out[task["id"]] = {
            "db_hash": tk.get_db_hash(),
            "error_actions": errors,
            "outputs_hash": hashlib.sha256(json.dumps(outputs).encode()).hexdigest(),
        }
    return out


replay = {
    "pristine_hash": fresh("real").get_db_hash(),
    "head": gold_replay(f"{retail_dir}/tasks.json"),
    "v0.2.1": gold_replay(f"{data}/_versions/v0.2.1-0ed2fd8/tau2/domains/retail/tasks.json"),
}
with open(f"{testdata}/golden/gold_replay.json", "w") as f:
    json.dump(replay, f, indent=1, sort_keys=True)
    f.write("\n")
