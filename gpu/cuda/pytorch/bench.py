#!/usr/bin/env python3
"""PyTorch baseline for `make gpu-bench`: the training step BenchmarkTrainStep times, in transformers.

Same shapes (Qwen3-0.6B and 1.7B geometry, random weights), same micro-batches (4096-token sequences,
16k and 32k tokens), same GPU, same run: Qwen3ForCausalLM with SDPA attention, fp32 master weights
under bf16 autocast (mixed precision with fp32 AdamW state, the same arithmetic split as the Go
backend), log-softmax gather of the target tokens, backward, clip_grad_norm_, fused AdamW.
An out-of-memory configuration is reported as such (and retried with gradient checkpointing, the
transformers counterpart of Options.Recompute).
Writes $T2_REPORT_DIR/torch_bench.json when T2_REPORT_DIR is set and prints a table.
"""
import json
import os
import statistics
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

PEAK = 989e12  # dense bf16, H100 SXM / H200


def config(hidden, inter):
    return Qwen3Config(vocab_size=151936, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                       rope_theta=1e6, tie_word_embeddings=True, max_position_embeddings=40960)


def flops(cfg, tokens, seq):
    H, I, L = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    qd, kvd = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    matmul = L * (H * (qd + 2 * kvd) + qd * H + 3 * H * I) + cfg.vocab_size * H
    pairs = (tokens // seq) * seq * (seq + 1) / 2
    return 6 * matmul * tokens + 12 * L * qd * pairs


def bench(name, cfg, tokens, seq=4096, ckpt=False, micro=1, steps=5, warmup=2):
    """One optimizer step over `micro` micro-batches of `tokens` tokens (gradients accumulated)."""
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    rec = {"name": name + ("-ckpt" if ckpt else ""), "tokens": micro * tokens, "device": torch.cuda.get_device_name()}
    model = opt = None
    try:
        torch.manual_seed(0)
        model = Qwen3ForCausalLM(cfg).to("cuda", torch.float32)
        model.config._attn_implementation = "sdpa"
        if ckpt:
            model.gradient_checkpointing_enable()
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1.7e-5, weight_decay=0.017, fused=True)
        batches = [torch.randint(0, cfg.vocab_size, (tokens // seq, seq), device="cuda") for _ in range(micro)]
        w = (torch.arange(seq - 1, device="cuda") % 7 - 3).float() * 1e-3

        def step():
            for ids in batches:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits = model(input_ids=ids).logits
                logp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
                loss = (logp * w).sum()
                del logits
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)

        for _ in range(warmup):
            step()
        torch.cuda.synchronize()
        times = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        rec.update(step_ms=med * 1e3, tokens_per_s=micro * tokens / med, mfu=micro * flops(cfg, tokens, seq) / med / PEAK,
                   peak_gb=torch.cuda.max_memory_allocated() / 1e9)
    except torch.OutOfMemoryError as e:
        rec.update(note="out of memory", peak_gb=torch.cuda.max_memory_allocated() / 1e9)
    finally:
        del model, opt
        torch.cuda.empty_cache()
    return rec


def main():
    shapes = os.environ.get("T2_TORCH_SHAPES", "0.6B/16k,0.6B/32k,1.7B/16k,1.7B/32k").split(",")
    geoms = {"0.6B": (1024, 3072), "1.7B": (2048, 6144)}
    out = []
    for s in shapes:  # "1.7B/16k" or "1.7B/16kx4" (4 micro-batches per optimizer step)
        m, t = s.split("/")
        t, _, micro = t.partition("x")
        tokens = int(t.rstrip("k")) * 1024
        micro = int(micro or 1)
        r = bench("torch/" + s, config(*geoms[m]), tokens, micro=micro)
        out.append(r)
        if r.get("note") == "out of memory":
            out.append(bench("torch/" + s, config(*geoms[m]), tokens, ckpt=True, micro=micro))
        print(json.dumps(out[-1]), flush=True)
    d = os.environ.get("T2_REPORT_DIR")
    if d:
        json.dump(out, open(os.path.join(d, "torch_bench.json"), "w"), indent=1)
    print(f"{'name':<26} {'tok/s':>10} {'MFU%':>6} {'step ms':>9} {'peak GB':>8}")
    for r in out:
        if "step_ms" in r:
            print(f"{r['name']:<26} {r['tokens_per_s']:>10.0f} {100 * r['mfu']:>6.1f} {r['step_ms']:>9.1f} {r['peak_gb']:>8.1f}")
        else:
            print(f"{r['name']:<26} {r.get('note', '')}")


if __name__ == "__main__":
    main()
