#!/usr/bin/env python3
"""Check the CUDA backend against PyTorch (run by TestAgainstPyTorch in gpu/cuda, -tags cuda).

Usage: check.py DIR, where DIR holds what the Go test wrote:
  model/            config.json + model.safetensors (fp32), the weights before the step
  batch.json        sequences, per-token loss weights, the tree packing (nodes[s][t] = node of token t
                    of sequence s), optimizer settings, and the Go grad norm
  go.safetensors    logp, entropy [nodes]; grad.<name>; after.<name> (weights after one AdamW step)

It computes, with transformers' Qwen3ForCausalLM on each sequence *unpacked*:
  * a float64 reference: per-token log-probs, entropies, and autograd gradients of
    L = sum_s sum_t w[s][t] * logp[s][t];
  * the same in bfloat16 (sdpa attention), the precision the GPU computes in, as the yardstick:
    the Go numbers must be about as close to float64 as PyTorch's own bf16 numbers are;
  * one torch.optim.AdamW step (after clip_grad_norm_) on the fp32 weights using the Go gradients,
    which must match the Go step to fp32 rounding (this checks optimizer semantics exactly).
Writes DIR/report.json {"pass": bool, "failures": [...], "metrics": {...}} and prints a summary.
"""
import json
import math
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import Qwen3ForCausalLM

# pass rule: go_err <= RATIO * torch_bf16_err + FLOOR (each against the float64 reference)
RATIO, FLOOR_LOGP, FLOOR_GRAD = 3.0, 0.01, 0.02
ADAMW_TOL = 2e-6


def seq_logprobs(model, seq, dtype):
    ids = torch.tensor([seq], device="cuda")
    logits = model(input_ids=ids).logits[0].to(torch.float64)  # [T, V]
    logsm = torch.log_softmax(logits[:-1], dim=-1)
    tgt = ids[0, 1:]
    lp = logsm.gather(-1, tgt[:, None])[:, 0]
    ent = -(logsm.exp() * logsm).sum(-1)
    return lp, ent


def run(model, batch, dtype):
    model.zero_grad(set_to_none=True)
    total = 0.0
    lps, ents = [], []
    for seq, w in zip(batch["sequences"], batch["weights"]):
        lp, ent = seq_logprobs(model, seq, dtype)
        wt = torch.tensor(w[1:], device="cuda", dtype=torch.float64)
        total = total + (wt * lp).sum()
        lps.append(lp.detach())
        ents.append(ent.detach())
    total.backward()
    grads = {n: p.grad.detach().to(torch.float64).flatten() for n, p in model.named_parameters()}
    return lps, ents, grads


def rel(a, b):
    d = torch.linalg.vector_norm(a - b).item()
    n = torch.linalg.vector_norm(b).item()
    return d / n if n > 0 else d


def main():
    d = sys.argv[1]
    batch = json.load(open(os.path.join(d, "batch.json")))
    go = load_file(os.path.join(d, "go.safetensors"), device="cuda")
    mdir = os.path.join(d, "model")
    torch.manual_seed(0)
    ref = Qwen3ForCausalLM.from_pretrained(mdir, dtype=torch.float64, attn_implementation="eager").cuda()
    bf = Qwen3ForCausalLM.from_pretrained(mdir, dtype=torch.bfloat16, attn_implementation="sdpa").cuda()
    ref.train()
    bf.train()
    r_lp, r_ent, r_g = run(ref, batch, torch.float64)
    b_lp, b_ent, b_g = run(bf, batch, torch.bfloat16)

    nodes = batch["nodes"]
    go_lp = torch.cat([go["logp"].to(torch.float64)[torch.tensor(ns[1:], device="cuda")] for ns in nodes])
    go_ent = torch.cat([go["entropy"].to(torch.float64)[torch.tensor(ns[1:], device="cuda")] for ns in nodes])
    r_lp, r_ent, b_lp, b_ent = (torch.cat(x) for x in (r_lp, r_ent, b_lp, b_ent))

    failures, metrics = [], {}

    def judge(what, go_err, bf_err, floor):
        ok = go_err <= RATIO * bf_err + floor and math.isfinite(go_err)
        metrics[what] = {"go": go_err, "torch_bf16": bf_err, "ok": ok}
        if not ok:
            failures.append(f"{what}: go {go_err:.4g} vs torch bf16 {bf_err:.4g}")

    judge("logp_maxabs", (go_lp - r_lp).abs().max().item(), (b_lp - r_lp).abs().max().item(), FLOOR_LOGP)
    judge("entropy_maxabs", (go_ent - r_ent).abs().max().item(), (b_ent - r_ent).abs().max().item(), FLOOR_LOGP)
    for name in sorted(r_g):
        g = go["grad." + name].to(torch.float64)
        judge("grad " + name, rel(g, r_g[name]), rel(b_g[name], r_g[name]), FLOOR_GRAD)

    # AdamW: torch.optim.AdamW on the fp32 weights with the Go gradients.
    m32 = Qwen3ForCausalLM.from_pretrained(mdir, dtype=torch.float32).cuda()
    params = dict(m32.named_parameters())
    for name, p in params.items():
        p.grad = go["grad." + name].view_as(p).clone()
    o = batch["optimizer"]
    norm = torch.nn.utils.clip_grad_norm_(list(params.values()), o["max_grad_norm"]).item()
    opt = torch.optim.AdamW(list(params.values()), lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                            weight_decay=o["weight_decay"], foreach=False)
    opt.step()
    worst = 0.0
    for name, p in params.items():
        worst = max(worst, (go["after." + name] - p.detach().flatten()).abs().max().item())
    metrics["adamw_max_abs"] = worst
    metrics["grad_norm"] = {"go": batch["grad_norm"], "torch": norm}
    if not worst <= ADAMW_TOL:
        failures.append(f"AdamW step: max |go - torch| = {worst:.3g} > {ADAMW_TOL}")
    if abs(batch["grad_norm"] - norm) > 1e-4 * max(norm, 1e-12):
        failures.append(f"grad norm: go {batch['grad_norm']} vs torch {norm}")

    metrics["tokens_scored"] = int(r_lp.numel())
    metrics["tree_nodes"] = len(batch["tree"]["tokens"])
    metrics["unpacked_tokens"] = sum(len(s) for s in batch["sequences"])
    rep = {"pass": not failures, "failures": failures, "metrics": metrics}
    json.dump(rep, open(os.path.join(d, "report.json"), "w"), indent=1)
    print(f"{'check':<58} {'go':>10} {'torch bf16':>10}")
    for k, v in metrics.items():
        if isinstance(v, dict) and "torch_bf16" in v:
            print(f"{k:<58} {v['go']:>10.4g} {v['torch_bf16']:>10.4g} {'ok' if v['ok'] else 'FAIL'}")
    print(f"adamw max |go - torch.optim.AdamW| = {worst:.3g}; grad norm go {batch['grad_norm']:.6g} torch {norm:.6g}")
    print("PASS" if not failures else "FAIL: " + "; ".join(failures))


if __name__ == "__main__":
    main()
