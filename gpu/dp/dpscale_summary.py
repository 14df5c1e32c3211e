#!/usr/bin/env python3
"""Summary of `bash gpu/dp/device-test.sh multi` (docs/MULTIGPU.md): a markdown report of the stages,
the correctness tests and every DPSCALE line (the Go benchmark's and the FSDP2 script's).

    python3 gpu/dp/dpscale_summary.py --stages STAGES --env ENV --jsonl OUT.jsonl --out OUT.md LOG...

STAGES holds one line per stage, "name|status|seconds|limit". Standard library only.
"""
import argparse
import json
import os
import re


def records(paths):
    out = []
    for p in paths:
        if not os.path.exists(p):
            continue
        with open(p, errors="replace") as f:
            for line in f:
                i = line.find("DPSCALE {")
                if i < 0:
                    continue
                try:
                    r = json.loads(line[i + len("DPSCALE "):])
                except json.JSONDecodeError as e:
                    r = {"impl": "?", "error": f"unreadable DPSCALE line in {os.path.basename(p)}: {e}"}
                r["_log"] = os.path.basename(p)
                out.append(r)
    return out


def tests(paths):
    """The go test verdict lines ('--- PASS: TestX (1.2s)') and the final ok/FAIL of each log."""
    out = []
    for p in paths:
        if not os.path.exists(p):
            continue
        with open(p, errors="replace") as f:
            for line in f:
                m = re.match(r"\s*--- (PASS|FAIL|SKIP): (Test\S+) \(([\d.]+)s\)", line)
                if m:
                    out.append((m.group(2), m.group(1), m.group(3), os.path.basename(p)))
    return out


def memory_tables(paths):
    """dp.WriteMemoryTable's tables (a 'NAME: N parameters, backend cuda; per rank…' line and its
    rows) and the FSDP2 script's memory estimates, as they appear in the logs, once each."""
    out, seen = [], set()
    for p in paths:
        if not os.path.exists(p):
            continue
        rows = None
        with open(p, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if "parameters, backend cuda; per rank" in line:
                    rows = [line]
                    continue
                if rows is not None:
                    if re.match(r"(ranks|\d+)\s", line):
                        rows.append(line)
                        continue
                    if rows[0] not in seen:
                        seen.add(rows[0])
                        out += rows + [""]
                    rows = None
                if line.startswith("fsdp2: ") and "memory estimate" in line and line not in seen:
                    seen.add(line)
                    out += [line, ""]
        if rows and rows[0] not in seen:
            seen.add(rows[0])
            out += rows + [""]
    return out


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "—"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", required=True)
    ap.add_argument("--env")
    ap.add_argument("--out", required=True)
    ap.add_argument("--jsonl")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    recs = records(a.logs)
    # Scaling efficiency of every line against the 1-GPU line of the same implementation, model
    # and shape in this run (the Go benchmark computes its own in-process; FSDP2 runs one process
    # per GPU count, so it is computed here for both, the same way).
    base = {(r.get("impl"), r.get("model"), r.get("shape")): r["tokens_per_s"]
            for r in recs if r.get("world") == 1 and r.get("tokens_per_s") and not r.get("error")}
    for r in recs:
        b = base.get((r.get("impl"), r.get("model"), r.get("shape")))
        if b and r.get("tokens_per_s") and not r.get("error"):
            r["scaling_eff_vs_1gpu"] = r["tokens_per_s"] / (r["world"] * b)
    if a.jsonl:
        with open(a.jsonl, "w") as f:
            for r in recs:
                f.write(json.dumps({k: v for k, v in r.items() if k != "_log"}) + "\n")
    L = ["# Multi-GPU measurement (`bash gpu/dp/device-test.sh multi`)", ""]
    if a.env and os.path.exists(a.env):
        L += ["## Machine", "", "```", open(a.env, errors="replace").read().rstrip(), "```", ""]
    L += ["## Stages", "", "| stage | status | seconds | limit |", "|---|---|---|---|"]
    with open(a.stages) as f:
        for line in f:
            parts = line.rstrip("\n").split("|")
            if len(parts) == 4:
                L.append("| " + " | ".join(parts) + " |")
    L += ["", "## Correctness (go test -tags cuda -run 'NCCL|CUDA')", ""]
    ts = tests(a.logs)
    if ts:
        L += ["| test | result | seconds |", "|---|---|---|"]
        L += [f"| {n} | {res} | {s} |" for n, res, s, _ in ts]
    else:
        L.append("No test verdicts found (see correctness.log).")
    L += ["", "## Throughput (DPSCALE lines)", "",
          "MFU per GPU = gpu/dp.Cost FLOPs (6·P_layers·tokens + 12·L·q_dim·visible pairs + 6·H·V·scored "
          "tokens; recomputation not counted) per GPU per second ÷ 989 TFLOP/s (H100 SXM dense bf16). "
          "Shapes: `tree` = τ²-shaped prefix-tree micro-batches (the trainer's packing, loss on completions); "
          "`chain` = one causal sequence, every token scored (what FSDP2 runs). Scaling efficiency = "
          "tokens/s ÷ (GPUs × the same implementation's 1-GPU tokens/s in this run).", "",
          "| impl | model | shape | GPUs | tokens/GPU | step ms (median) | tokens/s | tokens/s/GPU | MFU/GPU | "
          "peak mem GB/GPU | scaling eff. | note |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        model = os.path.basename(os.path.dirname(str(r.get("model", "")))) or r.get("model", "?")
        note = r.get("error", "")
        eff = r.get("scaling_eff_vs_1gpu")
        L.append("| " + " | ".join([
            str(r.get("impl", "?")), model, str(r.get("shape", "")), str(r.get("world", "")),
            str(r.get("tokens_per_gpu", "")), fmt(r.get("step_ms_median"), ".1f"), fmt(r.get("tokens_per_s"), ",.0f"),
            fmt(r.get("tokens_per_s_per_gpu"), ",.0f"),
            fmt(100 * r["mfu_per_gpu"], ".1f") + "%" if isinstance(r.get("mfu_per_gpu"), (int, float)) else "—",
            fmt(r.get("peak_mem_gb"), ".1f"), fmt(100 * eff, ".1f") + "%" if eff else "—",
            note.replace("|", "/")[:300]]) + " |")
    if not recs:
        L.append("| (no DPSCALE line in any log) | | | | | | | | | | | |")
    mem = memory_tables(a.logs)
    if mem:
        L += ["", "## Memory (gpu/dp memory model per rank; FSDP2 estimates)", "", "```"] + mem[:-1] + ["```"]
    L += ["", "Raw lines: dpscale.jsonl; logs: the other files beside this one.", ""]
    with open(a.out, "w") as f:
        f.write("\n".join(L))
    print("\n".join(L))


if __name__ == "__main__":
    main()
