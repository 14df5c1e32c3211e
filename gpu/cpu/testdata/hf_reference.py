#!/usr/bin/env python3
"""Check gpu/cpu's golden log-probs against Hugging Face transformers' Qwen3ForCausalLM.

golden.json (next to this script) lists token sequences on the tiny checkpoints in this directory
(tiny-tied: fp32, tied embeddings, rope_theta 1e4; tiny-untied: bf16 on disk, untied lm_head,
rope_theta 1e6) with the per-token log-probs and entropies the Go reference computes, including one
sequence whose positions start at 30000 (position_ids are passed explicitly, as the trainer's tree
depths are). This script loads each checkpoint with transformers, recomputes the same numbers and
fails (exit 1) when any differs by more than the tolerance.

Usage (on a machine with torch + transformers, e.g. the GPU device):
    python3 gpu/cpu/testdata/hf_reference.py                   # fp32, cuda if available, tol 1e-4
    python3 gpu/cpu/testdata/hf_reference.py --dtype bfloat16  # bf16 compute, tol 0.1 (report only)
    python3 gpu/cpu/testdata/hf_reference.py --json out.json   # also write transformers' numbers
"""
import argparse
import json
import os
import sys

import torch
from transformers import Qwen3ForCausalLM


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--golden", default=os.path.join(here, "golden.json"))
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tol", type=float, default=None, help="max |difference| (default 1e-4 fp32, 0.1 bf16)")
    ap.add_argument("--attn", default="eager", help="attn_implementation (eager, sdpa)")
    ap.add_argument("--json", default=None, help="write transformers' log-probs/entropies here")
    args = ap.parse_args()
    tol = args.tol if args.tol is not None else (1e-4 if args.dtype == "float32" else 0.1)
    dtype = getattr(torch, args.dtype)
    # fp32 must mean fp32: no TF32 tensor-core matmuls.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    with open(args.golden) as f:
        golden = json.load(f)
    base = os.path.dirname(os.path.abspath(args.golden))
    models = {}
    worst_lp = worst_ent = 0.0
    failed = 0
    out = {"dtype": args.dtype, "device": args.device, "transformers": __import__("transformers").__version__,
           "torch": torch.__version__, "cases": []}
    for case in golden["cases"]:
        ck = case["checkpoint"]
        if ck not in models:
            m = Qwen3ForCausalLM.from_pretrained(os.path.join(base, ck), torch_dtype=dtype, attn_implementation=args.attn)
            models[ck] = m.to(args.device).eval()
        model = models[ck]
        toks = torch.tensor([case["tokens"]], device=args.device)
        pos = torch.arange(len(case["tokens"]), device=args.device)[None] + case["position_offset"]
        with torch.no_grad():
            logits = model(input_ids=toks, position_ids=pos, use_cache=False).logits[0, :-1].double()
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, toks[0, 1:, None]).squeeze(-1)
        ent = -(logp_all.exp() * logp_all).sum(-1)
        want_lp = torch.tensor(case["logprobs"], dtype=torch.float64, device=args.device)
        want_ent = torch.tensor(case["entropy"], dtype=torch.float64, device=args.device)
        d_lp = (logp - want_lp).abs().max().item()
        d_ent = (ent - want_ent).abs().max().item()
        worst_lp, worst_ent = max(worst_lp, d_lp), max(worst_ent, d_ent)
        ok = d_lp <= tol and d_ent <= tol
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {ck:12s} {case['name']:16s} tokens {len(case['tokens']):3d} "
              f"offset {case['position_offset']:5d}  max|Δlogp| {d_lp:.2e}  max|Δentropy| {d_ent:.2e}")
        if not ok:
            for i in range(len(case["logprobs"])):
                print(f"     token {i + 1:3d}: go {case['logprobs'][i]: .7f}  hf {logp[i].item(): .7f}   "
                      f"entropy go {case['entropy'][i]:.7f} hf {ent[i].item():.7f}")
        out["cases"].append({"name": case["name"], "checkpoint": ck, "logprobs": logp.tolist(), "entropy": ent.tolist()})
    print(f"worst |Δlogp| {worst_lp:.3e}, worst |Δentropy| {worst_ent:.3e}, tolerance {tol:g}, "
          f"{args.dtype} on {args.device}: {'PASS' if failed == 0 else f'FAIL ({failed} cases)'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
