"""Regenerate golden/tasks.json: for every mock task (HEAD), the state after
τ²'s Environment.set_state steps that do not need messages
(initialization_data with its toolkit-DB aliasing, initialization_actions),
then the gold actions (errors ignored), then the env assertions: results
and the agent/user DB hashes. Uses tau2-bench's mock toolkits (a2c0247).

    PYTHONPATH=/path/to/stubbed/tau2 python3 gen_golden.py DATA_DIR
"""
import json
import sys

from tau2.domains.mock.data_model import MockDB
from tau2.domains.mock.tools import MockTools
from tau2.domains.mock.user_data_model import MockUserDB
from tau2.domains.mock.user_tools import MockUserTools


def main(data):
    d = f"{data}/tau2/domains/mock"
    out = {}
    for task in json.load(open(f"{d}/tasks.json")):
        tools = MockTools(MockDB.load(f"{d}/db.json"))
        user_tools = MockUserTools(MockUserDB.load(f"{d}/user_db.json"))
        st = task.get("initial_state") or {}
        init = st.get("initialization_data") or {}
        if init.get("agent_data") is not None:
            tools.update_db(init["agent_data"])
            user_tools.db = tools.db
        if init.get("user_data") is not None:
            user_tools.update_db(init["user_data"])
            tools.db = user_tools.db
        for a in st.get("initialization_actions") or []:
            kit = user_tools if a["env_type"] == "user" else tools
            getattr(kit, a["func_name"])(**a["arguments"])
        ec = task.get("evaluation_criteria") or {}
        errors = []
        for i, a in enumerate(ec.get("actions") or []):
            kit = user_tools if a.get("requestor", "assistant") == "user" else tools
            try:
                kit.use_tool(a["name"], **a["arguments"])
            except Exception:
                errors.append(i)
        asserts = []
        for a in ec.get("env_assertions") or []:
            kit = user_tools if a["env_type"] == "user" else tools
            try:
                asserts.append(getattr(kit, a["func_name"])(**a["arguments"]) == a.get("assert_value", True))
            except Exception as e:
                asserts.append(f"Error: {e}")
        out[task["id"]] = {"error_actions": errors, "assertions": asserts,
                           "agent_hash": tools.get_db_hash(), "user_hash": user_tools.get_db_hash()}
    with open("golden/tasks.json", "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
