#!/usr/bin/env python3
"""An independent numpy transcription of transformers' modeling_qwen3 forward pass (float64, plain
causal mask, RoPE angles rounded to fp32 as transformers computes them), checked against golden.json.

It is a second implementation, not transformers itself: hf_reference.py is the parity check of
record. This one needs only numpy (Debian: python3-numpy), so it runs on machines without torch:
    python3 gpu/cpu/testdata/numpy_reference.py
"""
import json, struct, sys, os
import numpy as np
base = os.path.dirname(os.path.abspath(__file__))
def load(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    b = open(os.path.join(d, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8+n]); data = b[8+n:]
    W = {}
    for k, v in hdr.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]; raw = data[s:e]
        if v["dtype"] == "F32": a = np.frombuffer(raw, "<f4").astype(np.float64)
        elif v["dtype"] == "BF16": a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        W[k] = a.reshape(v["shape"])
    return cfg, W
def rms(x, w, eps): return x / np.sqrt((x*x).mean(-1, keepdims=True) + eps) * w
def fwd(cfg, W, toks, off):
    H, nh, nkv, hd, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["rms_norm_eps"]
    T = len(toks)
    x = W["model.embed_tokens.weight"][toks]
    inv = (np.float32(1.0) / (np.float32(cfg["rope_theta"]) ** (np.arange(0, hd, 2).astype(np.float32) / np.float32(hd)))).astype(np.float32)
    pos = np.arange(T) + off
    fr = np.outer(pos.astype(np.float32), inv).astype(np.float32).astype(np.float64); emb = np.concatenate([fr, fr], -1); cos, sin = np.cos(emb), np.sin(emb)
    def rope(q):  # q: T, heads, hd
        q1, q2 = q[..., :hd//2], q[..., hd//2:]
        return q * cos[:, None] + np.concatenate([-q2, q1], -1) * sin[:, None]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = lambda s: W[f"model.layers.{l}.{s}"]
        h = rms(x, p("input_layernorm.weight"), eps)
        q = (h @ p("self_attn.q_proj.weight").T).reshape(T, nh, hd)
        k = (h @ p("self_attn.k_proj.weight").T).reshape(T, nkv, hd)
        v = (h @ p("self_attn.v_proj.weight").T).reshape(T, nkv, hd)
        q = rope(rms(q, p("self_attn.q_norm.weight"), eps)); k = rope(rms(k, p("self_attn.k_norm.weight"), eps))
        rep = nh // nkv
        k = np.repeat(k, rep, axis=1); v = np.repeat(v, rep, axis=1)
        s = np.einsum("thd,shd->hts", q, k) * hd ** -0.5 + mask
        s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", s, v).reshape(T, nh * hd)
        x = x + o @ p("self_attn.o_proj.weight").T
        h = rms(x, p("post_attention_layernorm.weight"), eps)
        g = h @ p("mlp.gate_proj.weight").T; u = h @ p("mlp.up_proj.weight").T
        x = x + ((g / (1 + np.exp(-g))) * u) @ p("mlp.down_proj.weight").T
    x = rms(x, W["model.norm.weight"], eps)
    lm = W.get("lm_head.weight", W["model.embed_tokens.weight"]) if not cfg["tie_word_embeddings"] else W["model.embed_tokens.weight"]
    z = x @ lm.T
    m = z.max(-1, keepdims=True); lse = m + np.log(np.exp(z - m).sum(-1, keepdims=True))
    lp = z - lse
    return lp
g = json.load(open(os.path.join(base, "golden.json")))
worst = 0
for c in g["cases"]:
    cfg, W = load(os.path.join(base, c["checkpoint"]))
    lp = fwd(cfg, W, np.array(c["tokens"]), c["position_offset"])
    got = lp[np.arange(len(c["tokens"]) - 1), c["tokens"][1:]]
    ent = -(np.exp(lp) * lp).sum(-1)[:-1]
    d = max(np.abs(got - np.array(c["logprobs"])).max(), np.abs(ent - np.array(c["entropy"])).max())
    worst = max(worst, d)
    print(c["checkpoint"], c["name"], "max diff %.2e" % d)
print("worst |difference| %.3e" % worst)
sys.exit(0 if worst < 1e-5 else 1)
