#!/usr/bin/env python3
"""transformers baseline for BenchmarkDecode / BenchmarkPrefill (gpu/cuda, -tags cuda).

Same shapes, same GPU, same run: Qwen3ForCausalLM (random weights, bf16, sdpa attention) and
model.generate. Decode: a batch of random prompts of the context length, timed as
(generate(1 + N new tokens) - generate(1 new token)) / N, i.e. per decode step after the prefill.
Prefill: one forward of a single prompt with logits_to_keep=1. An out-of-memory shape is reported.
Writes $T2_REPORT_DIR/torch_serve_bench.json when T2_REPORT_DIR is set and prints a table.
"""
import json
import os
import statistics
import sys
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM


def config(hidden, inter):
    return Qwen3Config(vocab_size=151936, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                       rope_theta=1e6, tie_word_embeddings=hidden == 1024 or hidden == 2048,
                       max_position_embeddings=40960)


def timed(fn, reps=3):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    shapes = os.environ.get("T2_BENCH_SHAPES", "0.6B,1.7B").split(",")
    recs = []
    for name, (hidden, inter) in {"0.6B": (1024, 3072), "1.7B": (2048, 6144)}.items():
        if name not in shapes:
            continue
        torch.manual_seed(0)
        model = Qwen3ForCausalLM(config(hidden, inter)).to("cuda", torch.bfloat16).eval()
        model.config._attn_implementation = "sdpa"
        model.generation_config.eos_token_id = None
        V = model.config.vocab_size
        with torch.no_grad():
            for batch, ctx in [(1, 4096), (16, 4096), (64, 4096), (256, 2048)]:
                rec = {"name": f"torch/decode/{name}", "batch": batch, "context": ctx, "device": torch.cuda.get_device_name()}
                try:
                    ids = torch.randint(0, V, (batch, ctx), device="cuda")
                    n = 16
                    gen = lambda k: model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                                   temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=k,
                                                   min_new_tokens=k, pad_token_id=0)
                    t1 = timed(lambda: gen(1), reps=2)
                    tn = timed(lambda: gen(1 + n), reps=2)
                    step = (tn - t1) / n
                    rec.update(step_ms=step * 1e3, tokens_per_s=batch / step)
                except torch.OutOfMemoryError:
                    rec.update(note="out of memory")
                torch.cuda.empty_cache()
                recs.append(rec)
                print(json.dumps(rec), flush=True)
            for tokens in [4096, 16384]:
                rec = {"name": f"torch/prefill/{name}", "batch": 1, "context": tokens, "device": torch.cuda.get_device_name()}
                try:
                    ids = torch.randint(0, V, (1, tokens), device="cuda")
                    t = timed(lambda: model(input_ids=ids, logits_to_keep=1))
                    rec.update(step_ms=t * 1e3, tokens_per_s=tokens / t)
                except torch.OutOfMemoryError:
                    rec.update(note="out of memory")
                torch.cuda.empty_cache()
                recs.append(rec)
                print(json.dumps(rec), flush=True)
        del model
        torch.cuda.empty_cache()
    if os.environ.get("T2_REPORT_DIR"):
        json.dump(recs, open(os.path.join(os.environ["T2_REPORT_DIR"], "torch_serve_bench.json"), "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
