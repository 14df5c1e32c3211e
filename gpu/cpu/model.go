package cpu

import (
	"fmt"

	"tau2rl/gpu"
)

// The Qwen3 layer loop: forward keeps every activation the backward pass reads (or, for
// LogProbs, reuses one layer's buffers), backward walks the layers in reverse calling each
// operation's backward function. Per layer, as Qwen3DecoderLayer:
//
//	a    = rmsnorm(x, input_layernorm)
//	q,k,v = a·Wqᵀ, a·Wkᵀ, a·Wvᵀ
//	qr,kr = rope(q_norm(q)), rope(k_norm(k))          per head, at tree-depth positions
//	att  = tree attention(qr, kr, v)
//	xMid = x + att·Woᵀ
//	b    = rmsnorm(xMid, post_attention_layernorm)
//	h    = silu(b·Wgᵀ) · (b·Wuᵀ)
//	x'   = xMid + h·Wdᵀ
//
// then f = rmsnorm(x_L, model.norm) feeds the chunked lm_head log-prob (logprob.go).

// layerParams are views of one layer's tensors into a flat buffer (parameters or gradients).
type layerParams[T float] struct {
	ln1, wq, wk, wv, qn, kn, wo, ln2, wg, wu, wd []T
}

// paramViews are views of every tensor into a flat buffer laid out in gpu.ParamSpecs order.
type paramViews[T float] struct {
	embed, norm, lmHead []T // lmHead aliases embed when embeddings are tied
	layers              []layerParams[T]
	byName              map[string][]T
}

// layout returns the offset of each tensor in the flat buffer and the total size.
func layout(cfg gpu.Config) (map[string]int, int) {
	offs := map[string]int{}
	n := 0
	for _, s := range gpu.ParamSpecs(cfg) {
		offs[s.Name] = n
		n += s.Size()
	}
	return offs, n
}

// views slices flat (of length layout's total) into named tensors.
func views[T float](cfg gpu.Config, flat []T) paramViews[T] {
	pv := paramViews[T]{byName: map[string][]T{}}
	off := 0
	for _, s := range gpu.ParamSpecs(cfg) {
		pv.byName[s.Name] = flat[off : off+s.Size() : off+s.Size()]
		off += s.Size()
	}
	pv.embed, pv.norm = pv.byName[gpu.NameEmbed], pv.byName[gpu.NameNorm]
	pv.lmHead = pv.embed
	if !cfg.TieWordEmbeddings {
		pv.lmHead = pv.byName[gpu.NameLMHead]
	}
	pv.layers = make([]layerParams[T], cfg.NumHiddenLayers)
	for l := range pv.layers {
		t := func(s string) []T { return pv.byName[gpu.LayerName(l, s)] }
		pv.layers[l] = layerParams[T]{
			ln1: t("input_layernorm.weight"), wq: t("self_attn.q_proj.weight"),
			wk: t("self_attn.k_proj.weight"), wv: t("self_attn.v_proj.weight"),
			qn: t("self_attn.q_norm.weight"), kn: t("self_attn.k_norm.weight"),
			wo: t("self_attn.o_proj.weight"), ln2: t("post_attention_layernorm.weight"),
			wg: t("mlp.gate_proj.weight"), wu: t("mlp.up_proj.weight"), wd: t("mlp.down_proj.weight"),
		}
	}
	return pv
}

// model holds parameters and gradients as flat buffers with named views.
type model[T float] struct {
	cfg     gpu.Config
	params  []T
	grads   []T
	p, g    paramViews[T]
	invFreq []float32
	hooks   *paramHooks // parameter sharding (paramshard.go); nil: every weight is whole
}

// newModel copies w's tensors into a flat parameter buffer of type T.
func newModel[T float](w *gpu.Weights) (*model[T], error) {
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	_, n := layout(w.Config)
	m := &model[T]{cfg: w.Config, params: make([]T, n), grads: make([]T, n)}
	m.p, m.g = views(w.Config, m.params), views(w.Config, m.grads)
	for name, dst := range m.p.byName {
		for i, v := range w.Tensors[name] {
			dst[i] = T(v)
		}
	}
	m.invFreq = ropeInvFreq(w.Config.RopeTheta, w.Config.HeadDim)
	return m, nil
}

// weights copies the parameters out as fp32 gpu.Weights.
func (m *model[T]) weights() *gpu.Weights {
	w := &gpu.Weights{Config: m.cfg, Tensors: map[string][]float32{}}
	for name, src := range m.p.byName {
		t := make([]float32, len(src))
		for i, v := range src {
			t[i] = float32(v)
		}
		w.Tensors[name] = t
	}
	return w
}

// layerActs are one layer's saved activations for a micro-batch of N nodes.
type layerActs[T float] struct {
	xIn, rstd1, a   []T // layer input, its rstd, normalized input
	q, k, v         []T // projections
	rstdQ, rstdK    []T // per-head q/k norm rstd
	qn, kn          []T // q/k after their norms (scratch for rope)
	qr, kr          []T // after RoPE
	att, lse        []T // attention output and per-(node, head) log-sum-exp
	xMid, rstd2, b  []T // residual after attention, its rstd, normalized
	g, u, h         []T // gate, up, silu(gate)·up
	attnOut, mlpOut []T // o_proj and down_proj outputs (scratch)
}

func newLayerActs[T float](c gpu.Config, N int) layerActs[T] {
	H, I, Q, KV, nh, nkv := c.HiddenSize, c.IntermediateSize, c.QDim(), c.KVDim(), c.NumAttentionHeads, c.NumKeyValueHeads
	return layerActs[T]{
		xIn: make([]T, N*H), rstd1: make([]T, N), a: make([]T, N*H),
		q: make([]T, N*Q), k: make([]T, N*KV), v: make([]T, N*KV),
		rstdQ: make([]T, N*nh), rstdK: make([]T, N*nkv),
		qn: make([]T, N*Q), kn: make([]T, N*KV), qr: make([]T, N*Q), kr: make([]T, N*KV),
		att: make([]T, N*Q), lse: make([]T, N*nh),
		xMid: make([]T, N*H), rstd2: make([]T, N), b: make([]T, N*H),
		g: make([]T, N*I), u: make([]T, N*I), h: make([]T, N*I),
		attnOut: make([]T, N*H), mlpOut: make([]T, N*H),
	}
}

// layerIn is a decoder layer up to attention: x saved as the layer input, the input RMSNorm,
// the q/k/v projections, the q/k norms and RoPE (into la.qr, la.kr, la.v). Training's forward and
// the serving decoder's step run the same code around their different attention.
func layerIn[T float](c gpu.Config, la *layerActs[T], lp layerParams[T], x, cos, sin []T, N int) {
	H, Q, KV := c.HiddenSize, c.QDim(), c.KVDim()
	nh, nkv, hd, eps := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.RMSNormEps
	copy(la.xIn, x)
	rmsnormForward(la.a, la.rstd1, la.xIn, lp.ln1, N, H, eps)
	matmulForward(la.q, la.a, lp.wq, N, H, Q)
	matmulForward(la.k, la.a, lp.wk, N, H, KV)
	matmulForward(la.v, la.a, lp.wv, N, H, KV)
	qkNormForward(la.qn, la.rstdQ, la.q, lp.qn, N, nh, hd, eps)
	qkNormForward(la.kn, la.rstdK, la.k, lp.kn, N, nkv, hd, eps)
	ropeForward(la.qr, la.qn, cos, sin, N, nh, hd)
	ropeForward(la.kr, la.kn, cos, sin, N, nkv, hd)
}

// layerOut is a decoder layer after attention (la.att): the output projection and residual, the
// post-attention RMSNorm and the SwiGLU MLP, whose residual is written to x.
func layerOut[T float](c gpu.Config, la *layerActs[T], lp layerParams[T], x []T, N int) {
	H, I, Q, eps := c.HiddenSize, c.IntermediateSize, c.QDim(), c.RMSNormEps
	matmulForward(la.attnOut, la.att, lp.wo, N, Q, H)
	residualForward(la.xMid, la.xIn, la.attnOut, N*H)
	rmsnormForward(la.b, la.rstd2, la.xMid, lp.ln2, N, H, eps)
	matmulForward(la.g, la.b, lp.wg, N, H, I)
	matmulForward(la.u, la.b, lp.wu, N, H, I)
	swigluForward(la.h, la.g, la.u, N*I)
	matmulForward(la.mlpOut, la.h, lp.wd, N, I, H)
	residualForward(x, la.xMid, la.mlpOut, N*H)
}

// acts is everything a forward pass keeps for its backward pass.
type acts[T float] struct {
	mb             *gpu.MicroBatch
	n              int
	cos, sin       []T
	layers         []layerActs[T]
	xOut, rstdF, f []T // last residual, final-norm rstd, final normalized hidden
	plan           headPlan
	lseHead        []T
	logp, entropy  []T
}

// forward runs the model over mb. With keep, every layer gets its own activation buffers for
// backward; without, one set is reused (LogProbs).
func (m *model[T]) forward(mb *gpu.MicroBatch, keep bool) *acts[T] {
	c := m.cfg
	N, H := mb.Len(), c.HiddenSize
	nh, nkv, hd, eps := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.RMSNormEps
	a := &acts[T]{mb: mb, n: N, plan: planHead(mb.Parent, mb.Score)}
	a.cos, a.sin = ropeTables[T](mb.Positions, m.invFreq)
	nbuf := 1
	if keep {
		nbuf = c.NumHiddenLayers
	}
	a.layers = make([]layerActs[T], nbuf)
	for i := range a.layers {
		a.layers[i] = newLayerActs[T](c, N)
	}
	x := make([]T, N*H)
	m.need(0)
	embeddingForward(x, m.p.embed, mb.Tokens, H)
	m.done(0)
	for l, lp := range m.p.layers {
		m.need(l + 1)
		la := &a.layers[l%nbuf]
		layerIn(c, la, lp, x, a.cos, a.sin, N)
		attentionForward(la.att, la.lse, la.qr, la.kr, la.v, mb.SubtreeEnd, N, nh, nkv, hd)
		layerOut(c, la, lp, x, N)
		m.done(l + 1)
	}
	m.headNeed()
	defer m.headDone()
	a.xOut, a.rstdF, a.f = x, make([]T, N), make([]T, N*H)
	rmsnormForward(a.f, a.rstdF, a.xOut, m.p.norm, N, H, eps)
	a.lseHead = make([]T, len(a.plan.rows))
	a.logp, a.entropy = make([]T, N), make([]T, N)
	logprobForward(a.logp, a.entropy, a.lseHead, a.f, m.p.lmHead, mb.Tokens, a.plan, H, c.VocabSize)
	return a
}

// backward accumulates into m.grads the gradient of Σ_c dlogp[c]·logp[c] for a forward run with
// keep. dlogp of roots is ignored.
func (m *model[T]) backward(a *acts[T], dlogp []T) {
	c := m.cfg
	mb := a.mb
	N, H, I, Q, KV := a.n, c.HiddenSize, c.IntermediateSize, c.QDim(), c.KVDim()
	nh, nkv, hd := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	df := make([]T, N*H)
	m.headNeed()
	logprobBackward(df, m.g.lmHead, dlogp, a.lseHead, a.f, m.p.lmHead, mb.Tokens, a.plan, H, c.VocabSize)
	dx := make([]T, N*H) // gradient of the residual stream at the current depth
	rmsnormBackward(dx, m.g.norm, df, a.xOut, m.p.norm, a.rstdF, N, H)
	m.headDone()

	dxMid, dmlp := make([]T, N*H), make([]T, N*H)
	dh, dg, du, db := make([]T, N*I), make([]T, N*I), make([]T, N*I), make([]T, N*H)
	dxIn, dattn, datt := make([]T, N*H), make([]T, N*H), make([]T, N*Q)
	dqr, dkr, dv := make([]T, N*Q), make([]T, N*KV), make([]T, N*KV)
	dqn, dkn, dq, dk, da := make([]T, N*Q), make([]T, N*KV), make([]T, N*Q), make([]T, N*KV), make([]T, N*H)
	for l := c.NumHiddenLayers - 1; l >= 0; l-- {
		m.need(l + 1)
		lp, gp, la := m.p.layers[l], m.g.layers[l], &a.layers[l]
		for _, b := range [][]T{dxMid, dmlp, dh, dg, du, db, dxIn, dattn, datt, dqr, dkr, dv, dqn, dkn, dq, dk, da} {
			clear(b)
		}
		// x' = xMid + mlp(rmsnorm(xMid))
		residualBackward(dxMid, dmlp, dx, N*H)
		matmulBackward(dh, gp.wd, dmlp, la.h, lp.wd, N, I, H)
		swigluBackward(dg, du, dh, la.g, la.u, N*I)
		matmulBackward(db, gp.wg, dg, la.b, lp.wg, N, H, I)
		matmulBackward(db, gp.wu, du, la.b, lp.wu, N, H, I)
		rmsnormBackward(dxMid, gp.ln2, db, la.xMid, lp.ln2, la.rstd2, N, H)
		// xMid = x + attn(rmsnorm(x))
		residualBackward(dxIn, dattn, dxMid, N*H)
		matmulBackward(datt, gp.wo, dattn, la.att, lp.wo, N, Q, H)
		attentionBackward(dqr, dkr, dv, datt, la.qr, la.kr, la.v, la.att, la.lse, mb.SubtreeEnd, N, nh, nkv, hd)
		ropeBackward(dqn, dqr, a.cos, a.sin, N, nh, hd)
		ropeBackward(dkn, dkr, a.cos, a.sin, N, nkv, hd)
		qkNormBackward(dq, gp.qn, dqn, la.q, lp.qn, la.rstdQ, N, nh, hd)
		qkNormBackward(dk, gp.kn, dkn, la.k, lp.kn, la.rstdK, N, nkv, hd)
		matmulBackward(da, gp.wq, dq, la.a, lp.wq, N, H, Q)
		matmulBackward(da, gp.wk, dk, la.a, lp.wk, N, H, KV)
		matmulBackward(da, gp.wv, dv, la.a, lp.wv, N, H, KV)
		rmsnormBackward(dxIn, gp.ln1, da, la.xIn, lp.ln1, la.rstd1, N, H)
		m.done(l + 1)
		dx, dxIn = dxIn, dx
	}
	// The embedding gradient reads no weight: no gather.
	embeddingBackward(m.g.embed, dx, mb.Tokens, H)
}
