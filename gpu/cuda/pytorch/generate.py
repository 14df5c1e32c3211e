#!/usr/bin/env python3
"""Greedy decoding with transformers, for TestGreedyAgainstTransformers (gpu/cuda, -tags cuda).

Usage: generate.py DIR, where DIR holds model/ (config.json + bf16 safetensors) and prompts.json
{"prompts": [[ids]...], "steps": N} (prompts of one length, so no padding). Runs
Qwen3ForCausalLM (bf16, sdpa attention) generate(do_sample=False) for N new tokens with EOS
disabled, and writes DIR/generated.json {"tokens": [[ids]...], "gaps": [[top1 - top2 logit]...]},
the gap per step telling where a bf16 near-tie could flip the argmax.
"""
import json
import sys

import torch
from transformers import Qwen3ForCausalLM


def main(d):
    spec = json.load(open(f"{d}/prompts.json"))
    model = Qwen3ForCausalLM.from_pretrained(f"{d}/model", dtype=torch.bfloat16, attn_implementation="sdpa").cuda()
    model.generation_config.eos_token_id = None
    ids = torch.tensor(spec["prompts"], device="cuda")
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=spec["steps"], return_dict_in_generate=True, output_scores=True,
                             pad_token_id=0, eos_token_id=None)
    toks = out.sequences[:, ids.shape[1]:].tolist()
    gaps = []
    for step in out.scores:
        top = torch.topk(step.float(), 2, dim=-1).values
        gaps.append((top[:, 0] - top[:, 1]).tolist())
    gaps = [list(g) for g in zip(*gaps)]
    json.dump({"tokens": toks, "gaps": gaps}, open(f"{d}/generated.json", "w"))
    print(f"transformers generate: {len(toks)} prompts x {len(toks[0])} tokens")


if __name__ == "__main__":
    main(sys.argv[1])
