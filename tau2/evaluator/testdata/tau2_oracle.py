"""Grade results files with τ²-bench's own evaluator: the oracle for the Go
evaluator's golden files. Not run by `go test`.

Needs a tau2-bench checkout (a2c0247, `src/` on PYTHONPATH) and pydantic
2.12+; its other dependencies (loguru, litellm, pandas, addict, toml, …)
may be stubbed (see tau2_stubs.py next to this file).

    go test ./tau2/evaluator -run TestOracle -oracle-inputs=/tmp/oracle
    TAU2_DATA_DIR=../shared/tau2-data PYTHONPATH=tau2/evaluator/testdata:/path/to/tau2-bench/src \
        python3 tau2/evaluator/testdata/tau2_oracle.py /tmp/oracle/*.json

For every input NAME.json it writes testdata/oracle/NAME.golden.json:
{simulation id: {"reward", "reward_breakdown", "db_match", "sha256"} or
{"error": "..."}} where sha256 is over json.dumps(reward_info.model_dump(
mode="json"), sort_keys=True), and NAME.graded.json (the file as τ² saves
it after re-grading, like `tau2 evaluate-trajs`) next to the input.

NL assertions use a fake judge instead of an LLM: its reasoning is the
sha256 of the system and user prompts, so the Go judge prompts must be
byte-identical to reproduce it, and metExpectation is derived from it.
"""
import hashlib
import json
import os
import sys

import tau2_stubs  # noqa: F401  (stubs for missing dependencies)

from tau2.data_model.simulation import Results
from tau2.evaluator import evaluator_nl_assertions
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
from tau2.scripts.evaluate_trajectories import is_solo_mode


class _Reply:
    def __init__(self, content):
        self.content = content


def fake_generate(model, messages, call_name=None, **kwargs):
    system, user = messages[0].content, messages[1].content
    digest = hashlib.sha256((system + "\x00" + user).encode()).hexdigest()
    outcomes = eval(user.rsplit("expectedOutcomes:\n        ", 1)[1].strip())  # the repr'd list
    results = [
        {"expectedOutcome": o, "reasoning": digest[:16] + ":" + str(i),
         "metExpectation": int(digest[i % 64], 16) % 4 != 0}
        for i, o in enumerate(outcomes)
    ]
    return _Reply(json.dumps({"results": results}))


evaluator_nl_assertions.generate = fake_generate


def main(paths):
    here = os.path.dirname(os.path.abspath(__file__))
    for path in paths:
        with open(path) as f:
            results = Results.model_validate_json(f.read())
        domain = results.info.environment_info.domain_name
        solo = is_solo_mode(results)
        tasks = {t.id: t for t in results.tasks}
        golden = {}
        for sim in results.simulations:
            try:
                ri = evaluate_simulation(
                    simulation=sim, task=tasks[sim.task_id], evaluation_type=EvaluationType.ALL,
                    solo_mode=solo, domain=domain, strict_replay=False)
            except Exception as e:  # τ² would record an infrastructure error
                golden[sim.id] = {"error": f"{type(e).__name__}: {e}"}
                continue
            dump = ri.model_dump(mode="json")
            golden[sim.id] = {
                "reward": dump["reward"],
                "reward_breakdown": dump["reward_breakdown"],
                "db_match": (dump["db_check"] or {}).get("db_match"),
                "sha256": hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest(),
            }
            sim.reward_info = ri
        name = os.path.splitext(os.path.basename(path))[0]
        with open(os.path.join(here, "oracle", name + ".golden.json"), "w") as f:
            json.dump(golden, f, indent=1, sort_keys=True)
            f.write("\n")
        results.save(os.path.splitext(path)[0] + ".graded.json")
        print(f"{name}: {len(golden)} simulations, {sum('error' in g for g in golden.values())} errors")


if __name__ == "__main__":
    main(sys.argv[1:])
