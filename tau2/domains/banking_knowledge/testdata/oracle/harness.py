"""Writes testdata/golden/*.json with τ²-bench's own banking_knowledge code.

Run inside the workdir built by setup.sh:
  PYTHONPATH=$W TAU2_DATA_DIR=... python3 harness.py OUT_DIR

* tasks.json: for every task, the DB after initialization_data, then every
  gold action replayed as τ²'s evaluator does (tools called with the task's
  arguments on KnowledgeTools / KnowledgeUserTools sharing one DB, the read
  log allowlist derived from the gold actions): each result (str, or
  "EXC <type>: <message>"), and the final DB hash (get_dict_hash of
  model_dump()).
* scenarios.json: the same for the hand-written call lists of
  ../scenarios.json (error paths, wrong arguments, repeated calls).
* discoverable.json: name, parsed docstring (tool_info), parameters
  (name, default repr or null) and mutates_state of every discoverable tool,
  and the base tools' names, types and mutates_state.
"""
import copy
import inspect
import json
import os
import sys
from pathlib import Path

from tau2.domains.banking_knowledge.data_model import TransactionalDB
from tau2.domains.banking_knowledge import tools as T
from tau2.environment.toolkit import DISCOVERABLE_ATTR, MUTATES_STATE_ATTR, TOOL_TYPE_ATTR
from tau2.utils import get_dict_hash, update_pydantic_model_with_dict

DATA = Path(os.environ["TAU2_DATA_DIR"]) / "tau2" / "domains" / "banking_knowledge"
HERE = Path(__file__).resolve().parent


def allowlist(actions):
    out = set()
    for a in actions or []:
        if a["name"] == "call_discoverable_agent_tool":
            n = (a.get("arguments") or {}).get("agent_tool_name")
            if n:
                out.add(n)
    return out


def run(base, init_data, actions, calls):
    db = copy.deepcopy(base)
    if init_data and init_data.get("agent_data"):
        db = update_pydantic_model_with_dict(db, init_data["agent_data"])
    agent = T.KnowledgeTools(db)
    agent.set_read_log_allowlist(allowlist(actions))
    user = T.KnowledgeUserTools(db)
    results = []
    for c in calls:
        tk = user if c.get("requestor", "assistant") == "user" else agent
        try:
            if not tk.has_tool(c["name"]):
                raise ValueError(f"Tool '{c['name']}' not found.")
            r = getattr(tk, c["name"])(**(c.get("arguments") or {}))
            results.append(r if isinstance(r, str) else "NONSTR " + repr(r))
        except Exception as e:  # noqa: BLE001 - recorded for the golden
            results.append(f"EXC {type(e).__name__}: {e}")
    return {"results": results, "hash": get_dict_hash(db.model_dump())}


def mutates(action):
    cls = T.KnowledgeUserTools if action.get("requestor", "assistant") == "user" else T.KnowledgeTools
    f = getattr(cls, action["name"], None)
    return True if f is None else getattr(f, MUTATES_STATE_ATTR, True)


def tool_meta(cls):
    out = []
    for name, f in inspect.getmembers(cls, predicate=inspect.isfunction):
        if not hasattr(f, TOOL_TYPE_ATTR):
            continue
        sig = inspect.signature(f)
        params = [[p.name, None if p.default is p.empty else repr(p.default)]
                  for p in sig.parameters.values() if p.name != "self"]
        out.append({
            "name": name,
            "discoverable": bool(getattr(f, DISCOVERABLE_ATTR, False)),
            "type": getattr(f, TOOL_TYPE_ATTR).value,
            "mutates": getattr(f, MUTATES_STATE_ATTR),
            "params": params,
            "tool_info": T.parse_discoverable_tool_docstring(f) if getattr(f, DISCOVERABLE_ATTR, False) else None,
        })
    return out


def main():
    out = Path(sys.argv[1])
    base = TransactionalDB.load(str(DATA / "db.json"))
    tasks = json.loads((DATA / "tasks.json").read_text())
    golden = {}
    for t in tasks:
        ec = t.get("evaluation_criteria") or {}
        acts = ec.get("actions") or []
        init = (t.get("initial_state") or {}).get("initialization_data")
        golden[t["id"]] = run(base, init, acts, acts)
        # drop the last state-mutating gold action (goldgen's drop_last_write)
        mut = [i for i, a in enumerate(acts) if mutates(a)]
        if mut:
            rest = acts[: mut[-1]] + acts[mut[-1] + 1 :]
            golden[t["id"]]["drop_last_write_hash"] = run(base, init, acts, rest)["hash"]
    (out / "tasks.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    scen_path = HERE.parent / "scenarios.json"
    if scen_path.exists():
        by_id = {t["id"]: t for t in tasks}
        res = {}
        for s in json.loads(scen_path.read_text()):
            t = by_id.get(s.get("task"), {})
            init = (t.get("initial_state") or {}).get("initialization_data")
            acts = (t.get("evaluation_criteria") or {}).get("actions") or []
            res[s["name"]] = run(base, init, acts, s["calls"])
        (out / "scenarios.json").write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    meta = {"agent": tool_meta(T.KnowledgeTools), "user": tool_meta(T.KnowledgeUserTools)}
    (out / "discoverable.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")


main()
