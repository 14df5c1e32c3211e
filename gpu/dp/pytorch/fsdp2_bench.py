#!/usr/bin/env python3
"""PyTorch FSDP2 beside gpu/dp's BenchmarkDataParallelStep (issue 16, docs/MULTIGPU.md).

    torchrun --standalone --nproc_per_node N gpu/dp/pytorch/fsdp2_bench.py \
        --config deploy/models/qwen3-1.7b/config.json --tokens-per-gpu 16384

The standard FSDP2 recipe (torchtitan's, without torch.compile or Float8):
- transformers Qwen3ForCausalLM built from the same config.json, random init (seed 0), fp32
  parameters on the GPU; attn_implementation "sdpa" (PyTorch's fused causal attention);
- activation checkpointing of every decoder layer (transformers' gradient checkpointing,
  non-reentrant), the counterpart of gpu/cuda's Options.Recompute;
- torch.distributed.fsdp.fully_shard on every decoder layer, then on the root (embedding, final
  norm, LM head), with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): the fp32
  parameters are the sharded masters, each layer is all-gathered in bf16 for its forward and
  backward, gradients are reduce-scattered in fp32 and kept sharded in fp32;
- torch.optim.AdamW on the sharded fp32 parameters (fp32 moments), fused kernel;
  clip_grad_norm_(1.0) before the step, as gpu/dp's optimizer step does.
Per rank, the parameters, gradients and AdamW state take 16 bytes per parameter ÷ world (gpu/dp:
2 + 4 + 12 ÷ world, its bf16 weights and fp32 gradients are whole on every rank).

Data: every rank trains one causal sequence of --tokens-per-gpu random tokens per step, every
position scored (log-softmax of the logits, gathered at the next token, weighted; the same
FLOPs as the Go benchmark's "chain" shape). The Go benchmark's "tree" shape (τ²-shaped prefix-tree
micro-batches, the trainer's packing) has shorter attention spans and scores only completion
tokens, so its tokens/s are not comparable to this; compare MFU, or chain against this.

MFU uses gpu/dp.Cost's formula: 6·P_layers·T + 12·L·(heads·head_dim)·T(T+1)/2 + 6·H·V·(T−1)
FLOPs per step per GPU (layer weight GEMMs, causal attention, LM head; recomputation not
counted) against 989 TFLOP/s, the dense bf16 peak of an H100 SXM.

Rank 0 prints one line "DPSCALE {json}" in the Go benchmark's format, progress lines before it.
--skip-if-no-fit first estimates the per-GPU memory and, if it exceeds the device, prints the
estimate in the DPSCALE line's error instead of running.

Run with NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (set here when unset): no
NVLink SHARP multicast on these machines.
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

PEAK = 989e12  # dense bf16, H100 SXM (H200 the same compute die)


def log(msg):
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"fsdp2: {msg}", flush=True)


def emit(rec):
    if int(os.environ.get("RANK", "0")) == 0:
        print("DPSCALE " + json.dumps(rec, ensure_ascii=False), flush=True)


def load_config(path):
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path) as f:
        d = json.load(f)
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim"):
        if not isinstance(d.get(k), int) or d[k] <= 0:
            raise ValueError(f"{path}: {k} missing or not a positive integer")
    return d


def qwen3_config(path, d, Qwen3Config):
    """The transformers config of path: AutoConfig's reading of a config.json (the path every hub
    checkpoint takes, legacy keys such as rope_theta included), else Qwen3Config(**d)."""
    from transformers import AutoConfig
    directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    try:
        cfg = AutoConfig.from_pretrained(directory)
    except Exception as e:  # e.g. the file is not named config.json
        log(f"AutoConfig could not read {directory} ({type(e).__name__}: {e}); building Qwen3Config directly")
        cfg = Qwen3Config(**{k: v for k, v in d.items() if k not in ("torch_dtype", "dtype", "architectures", "model_type")})
    if type(cfg).__name__ != "Qwen3Config":
        raise ValueError(f"{path}: a {type(cfg).__name__}, not a Qwen3 config")
    for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "tie_word_embeddings"):
        if getattr(cfg, k) != d.get(k, getattr(cfg, k)):
            raise ValueError(f"{path}: transformers read {k}={getattr(cfg, k)}, the file says {d[k]}")
    return cfg


def nccl_version(torch):
    try:
        v = torch.cuda.nccl.version()
        return ".".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)
    except Exception as e:
        return f"unknown ({type(e).__name__})"


def params(d):
    """Parameter count and per-layer GEMM parameters of a Qwen3 config (as gpu.Config.NumParams)."""
    H, I, L, V = d["hidden_size"], d["intermediate_size"], d["num_hidden_layers"], d["vocab_size"]
    q, kv = d["num_attention_heads"] * d["head_dim"], d["num_key_value_heads"] * d["head_dim"]
    layer_gemm = H * (q + 2 * kv) + q * H + 3 * H * I
    layer = layer_gemm + 2 * H + 2 * d["head_dim"]
    total = L * layer + V * H + H + (0 if d.get("tie_word_embeddings", False) else V * H)
    return total, layer_gemm, layer


def flops(d, T):
    """gpu/dp.Cost of one causal chain of T tokens, every token but the first scored."""
    H, L, V = d["hidden_size"], d["num_hidden_layers"], d["vocab_size"]
    q = d["num_attention_heads"] * d["head_dim"]
    _, layer_gemm, _ = params(d)
    return 6 * layer_gemm * L * T + 12 * L * q * T * (T + 1) / 2 + 6 * H * V * (T - 1)


def estimate_gb(d, T, world):
    """Per-GPU memory estimate of this recipe, in GB, with its parts."""
    total, _, layer = params(d)
    H, I, L, V = d["hidden_size"], d["intermediate_size"], d["num_hidden_layers"], d["vocab_size"]
    parts = {
        "fp32 params + fp32 grads + AdamW moments (16 B/param / world)": 16 * total / world,
        "two layers gathered in bf16 (forward prefetch)": 2 * 2 * layer,
        "root gathered in bf16 (embedding, LM head)": 2 * V * H * (1 if d.get("tie_word_embeddings", False) else 2),
        "checkpointed layer inputs (bf16)": L * T * H * 2,
        "one layer's recomputed activations (bf16, ~)": T * (12 * H + 6 * I) * 2,
        "logits bf16 + log-softmax fp32 out and its gradient": T * V * (2 + 4 + 4),
    }
    return sum(parts.values()) / 1e9, {k: round(v / 1e9, 2) for k, v in parts.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="Qwen3 config.json (or its directory)")
    ap.add_argument("--tokens-per-gpu", type=int, default=16384)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--optimizer", choices=["fused", "foreach"], default="fused")
    ap.add_argument("--skip-if-no-fit", action="store_true",
                    help="print the memory estimate instead of running when it exceeds the device")
    ap.add_argument("--fit-fraction", type=float, default=0.95,
                    help="share of the device memory the estimate may use (with --skip-if-no-fit)")
    a = ap.parse_args()
    if a.steps < 5 or a.warmup < 1 or a.tokens_per_gpu < 2:
        ap.error("want --steps ≥ 5, --warmup ≥ 1, --tokens-per-gpu ≥ 2")
    try:
        d = load_config(a.config)
    except (OSError, ValueError) as e:
        ap.error(f"--config: {e}")
    T = a.tokens_per_gpu
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    total, _, _ = params(d)
    rec = {"impl": "pytorch-fsdp2", "model": a.config, "params": total, "shape": "chain",
           "devices": list(range(world)), "world": world, "tokens_per_gpu": T, "scored_per_gpu": T - 1,
           "recompute": True}
    try:
        import torch
        import torch.distributed as dist
        import transformers
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        from transformers import Qwen3Config, Qwen3ForCausalLM
    except Exception as e:  # an old torch or transformers: say what is missing, as a result line
        rec["error"] = (f"needs torch ≥ 2.6 (torch.distributed.fsdp.fully_shard) and transformers with Qwen3: "
                        f"{type(e).__name__}: {e}")
        emit(rec)
        return 2
    if not torch.cuda.is_available() or torch.cuda.device_count() <= local:
        rec["error"] = f"no CUDA device for local rank {local} ({torch.cuda.device_count()} visible)"
        emit(rec)
        return 2
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    rec.update(device_name=torch.cuda.get_device_name(dev), torch=torch.__version__,
               transformers=transformers.__version__)
    est, parts = estimate_gb(d, T, world)
    cap = torch.cuda.get_device_properties(dev).total_memory / 1e9
    rec["estimate_gb"] = round(est, 1)
    log(f"{a.config}: {total / 1e9:.3g} B parameters, {T} tokens per GPU, world {world}; "
        f"memory estimate {est:.1f} GB of {cap:.1f} GB: {parts}")
    if a.skip_if_no_fit and est > a.fit_fraction * cap:
        rec["error"] = (f"skipped: the per-GPU estimate {est:.1f} GB exceeds {a.fit_fraction:.0%} of the "
                        f"{cap:.1f} GB device ({parts})")
        emit(rec)
        return 0
    dist.init_process_group("nccl", device_id=dev)
    try:
        cfg = qwen3_config(a.config, d, Qwen3Config)
        cfg.use_cache = False
        cfg._attn_implementation = "sdpa"
        torch.manual_seed(0)
        t0 = time.perf_counter()
        with torch.device(dev):
            model = Qwen3ForCausalLM(cfg)
        model = model.to(torch.float32)
        model.config._attn_implementation = "sdpa"
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.train()
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.model.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        torch.cuda.empty_cache()
        n = sum(p.numel() for p in model.parameters())  # DTensor numel is the global size
        log(f"model built and sharded in {time.perf_counter() - t0:.1f} s: {n / 1e9:.3g} B parameters "
            f"(config {total / 1e9:.3g} B), attention {model.config._attn_implementation}, "
            f"{torch.cuda.memory_allocated(dev) / 1e9:.1f} GB allocated")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01,
                                **({"fused": True} if a.optimizer == "fused" else {"foreach": True}))
        g = torch.Generator(device=dev)
        g.manual_seed(1 + rank)
        w = ((torch.arange(T - 1, device=dev) % 7) - 3).float() * 1e-4

        def step():
            ids = torch.randint(0, d["vocab_size"], (1, T), device=dev, generator=g)
            logits = model(input_ids=ids).logits
            logp = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
            loss = (logp[0] * w).sum()
            del logits
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)

        torch.cuda.reset_peak_memory_stats(dev)
        times = []
        for k in range(a.warmup + a.steps):
            torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize(dev)
            el = time.perf_counter() - t0
            what = "warm-up" if k < a.warmup else "timed"
            log(f"{what} step {k + 1}: {el * 1e3:.1f} ms (rank 0)")
            if k >= a.warmup:
                times.append(el)
        # The step time is the slowest rank's; the peak memory the largest rank's.
        tt = torch.tensor(times, device=dev, dtype=torch.float64)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        peak = torch.tensor([torch.cuda.max_memory_allocated(dev), torch.cuda.max_memory_reserved(dev)],
                            device=dev, dtype=torch.float64)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        times = tt.tolist()
        med = statistics.median(times)
        f = flops(d, T)
        rec.update(timed_steps=len(times), step_ms_median=med * 1e3, step_ms_all=[round(x * 1e3, 3) for x in times],
                   tokens_per_s=world * T / med, tokens_per_s_per_gpu=T / med, mfu_per_gpu=f / med / PEAK,
                   flops_per_gpu_step=f, peak_mem_gb=peak[0].item() / 1e9, reserved_gb=peak[1].item() / 1e9,
                   nccl_version=nccl_version(torch),
                   note="peak_mem_gb: torch.cuda.max_memory_allocated, max over ranks")
        emit(rec)
        return 0
    except Exception as e:
        oom = isinstance(e, torch.OutOfMemoryError)
        rec["error"] = "out of memory" if oom else f"{type(e).__name__}: {e}"
        rec["peak_mem_gb"] = torch.cuda.max_memory_allocated(dev) / 1e9
        traceback.print_exc()
        print(f"fsdp2: rank {rank}: {rec['error']}", file=sys.stderr, flush=True)
        emit(rec)
        return 1
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


if __name__ == "__main__":
    sys.exit(main())
