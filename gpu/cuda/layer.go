//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"

	"tau2rl/gpu"
)

// layerActs are the activations one layer's backward pass reads (bf16 unless noted).
type layerActs struct {
	xn1, qkv, qr, kr, att, x2, xn2, gu, h dptr
	rstd1, rstdq, rstdk, lse, rstd2       dptr // fp32
}

// activations holds every device buffer sized by the micro-batch: per-layer activations (one set
// for all layers with recomputation or in LogProbs, one per layer otherwise), the residual stream
// at each layer boundary, backward scratch, and the batch's index arrays.
type activations struct {
	cap, sets int
	ptrs      []dptr
	bytes     int64 // device memory held by ptrs

	layer []layerActs
	xs    []dptr // residual stream entering layer l (xs[L] leaves the last layer) [cap, H]
	xf    dptr   // final RMSNorm output [cap, H]
	rstdf dptr
	a     dptr // o_proj / down_proj output [cap, H] (the next RMSNorm adds the down projection to the stream)

	dresid, dresidBF dptr // residual-stream gradient, fp32 and a bf16 copy [cap, H]
	dxn, dh, dgu     dptr // [cap, H], [cap, I], [cap, 2I]
	datt, dk         dptr // [cap, QD], [cap, KVD]
	dq               dptr // fp32 [cap, QD]: the attention backward's dQ (atomics or TMA reductions sum there in fp32)
	dqBF             dptr // [cap, QD]: the WMMA kernels' bf16 dQ before widening (Options.Attention "wmma" only)
	dqkv, di         dptr // [cap, QD+2KVD]; fp32 [nh, cap]
	logits           dptr // bf16 [chunk, V]; with the fused head (Options.VocabTile) one tile, [chunk, min(VocabTile, V)]
	chunk            int
	headState        dptr // fused head only: fp32 [chunk, 3], each row's running (max, Σe^(x−max), Σe^(x−max)·x)
	headDX           dptr // fused head only: fp32 [chunk, H], the chunk's input gradient summed over the tiles

	tokens, positions, send, blockmax dptr // int32; blockmax: t2_tree_blockmax (per-64-key max and min of send, work orders)
	// The LM head runs only on head rows: nodes that parent a scored node (headPlan), int32.
	headRow, rowList, rowOf, childOff, childIdx dptr
	logp, ent, rowLse, rowEnt, dlogp            dptr // fp32 [cap]; rowLse/rowEnt per head row
}

func (a *activations) free() error {
	var errs []error
	for _, p := range a.ptrs {
		if err := free(p); err != nil {
			errs = append(errs, err)
		}
	}
	*a = activations{}
	return errors.Join(errs...)
}

// ensure sizes the activation buffers for n nodes; it reallocates only when n grows past capacity.
func (b *Backend) ensure(n int) error {
	sets := 1
	if !b.opt.Recompute {
		sets = b.cfg.NumHiddenLayers
	}
	if n <= b.act.cap && sets == b.act.sets {
		return nil
	}
	b.held -= b.act.bytes
	if err := b.act.free(); err != nil {
		return fmt.Errorf("cuda: free activations: %w", err)
	}
	c := b.cfg
	H, I, V, nh := c.HiddenSize, c.IntermediateSize, c.VocabSize, c.NumAttentionHeads
	QD, KVD := c.QDim(), c.KVDim()
	QKV := QD + 2*KVD
	capN := alignUp(n, 64)
	a := &b.act
	a.cap, a.sets = capN, sets
	a.chunk = min(b.opt.LogitChunk, capN)
	var err error
	get := func(bytes int) dptr {
		if err != nil {
			return nil
		}
		var p dptr
		p, err = malloc(bytes)
		if err == nil {
			a.ptrs = append(a.ptrs, p)
			a.bytes += int64(bytes)
		}
		return p
	}
	bf := func(cols int) dptr { return get(2 * capN * cols) }
	f32 := func(cols int) dptr { return get(4 * capN * cols) }
	a.layer = make([]layerActs, sets)
	for i := range a.layer {
		la := &a.layer[i]
		la.xn1, la.qkv, la.qr, la.kr, la.att = bf(H), bf(QKV), bf(QD), bf(KVD), bf(QD)
		la.x2, la.xn2, la.gu, la.h = bf(H), bf(H), bf(2*I), bf(I)
		la.rstd1, la.rstdq, la.rstdk, la.lse, la.rstd2 = f32(1), f32(nh), f32(c.NumKeyValueHeads), f32(nh), f32(1)
	}
	a.xs = make([]dptr, c.NumHiddenLayers+1)
	for i := range a.xs {
		a.xs[i] = bf(H)
	}
	a.xf, a.rstdf, a.a = bf(H), f32(1), bf(H)
	a.dresid, a.dresidBF, a.dxn, a.dh, a.dgu = f32(H), bf(H), bf(H), bf(I), bf(2*I)
	a.datt, a.dq, a.dk, a.dqkv, a.di = bf(QD), f32(QD), bf(KVD), bf(QKV), f32(nh)
	if b.attImpl() == C.T2_ATT_WMMA {
		a.dqBF = bf(QD)
	}
	logitCols := V
	if vt := b.opt.VocabTile; vt > 0 {
		logitCols = min(vt, V)
		a.headState, a.headDX = get(4*3*a.chunk), get(4*a.chunk*H)
	}
	a.logits = get(2 * a.chunk * logitCols)
	a.tokens, a.positions, a.send, a.blockmax = f32(1), f32(1), f32(1), get(blockmaxBytes(capN))
	a.headRow, a.rowList, a.rowOf, a.childOff, a.childIdx = f32(1), f32(1), f32(1), get(4*(capN+1)), f32(1)
	a.logp, a.ent, a.rowLse, a.rowEnt, a.dlogp = f32(1), f32(1), f32(1), f32(1), f32(1)
	if err != nil {
		_ = a.free()
		return fmt.Errorf("cuda: activations for %d tokens: %w", n, err)
	}
	b.held += a.bytes
	return nil
}

// headPlan says which rows of the final hidden states go through the LM head: only nodes that are
// the parent of a scored node (gpu.MicroBatch.Score; without a mask, every node with children).
type headPlan struct {
	rowList  []int32 // rowList[r]: the node of head row r, in node order
	rowOf    []int32 // rowOf[i]: node i's head row, or -1
	headRow  []int32 // headRow[c]: the head row of c's parent when c is scored, or -1 (roots too)
	childOff []int32 // head row r's scored children are childIdx[childOff[r]:childOff[r+1]] (CSR)
	childIdx []int32
}

func planHead(mb *gpu.MicroBatch) headPlan {
	n := mb.Len()
	hp := headPlan{rowOf: make([]int32, n), headRow: make([]int32, n)}
	scored := func(c int) bool { return mb.Parent[c] >= 0 && mb.Scored(c) }
	need := make([]bool, n)
	for c, p := range mb.Parent {
		if scored(c) {
			need[p] = true
		}
	}
	for i := range n {
		hp.rowOf[i] = -1
		if need[i] {
			hp.rowOf[i] = int32(len(hp.rowList))
			hp.rowList = append(hp.rowList, int32(i))
		}
	}
	R := len(hp.rowList)
	hp.childOff = make([]int32, R+1)
	for c, p := range mb.Parent {
		hp.headRow[c] = -1
		if scored(c) {
			hp.headRow[c] = hp.rowOf[p]
			hp.childOff[hp.rowOf[p]+1]++
		}
	}
	for r := range R {
		hp.childOff[r+1] += hp.childOff[r]
	}
	hp.childIdx = make([]int32, hp.childOff[R])
	fill := append([]int32(nil), hp.childOff[:R]...)
	for c, r := range hp.headRow {
		if r >= 0 {
			hp.childIdx[fill[r]] = int32(c)
			fill[r]++
		}
	}
	return hp
}

// uploadBatch validates mb and copies its index arrays (and the head plan the log-prob kernels
// need) to the device.
func (b *Backend) uploadBatch(mb *gpu.MicroBatch) error {
	if err := mb.Validate(b.cfg.VocabSize); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	n := mb.Len()
	if err := b.ensure(n); err != nil {
		return err
	}
	a := &b.act
	hp := planHead(mb)
	for _, u := range []struct {
		dst dptr
		src []int32
	}{
		{a.tokens, mb.Tokens}, {a.positions, mb.Positions}, {a.send, mb.SubtreeEnd},
		{a.headRow, hp.headRow}, {a.rowList, hp.rowList}, {a.rowOf, hp.rowOf},
		{a.childOff, hp.childOff}, {a.childIdx, hp.childIdx},
	} {
		if len(u.src) == 0 {
			continue
		}
		if err := h2dI32(u.dst, u.src); err != nil {
			return fmt.Errorf("cuda: upload micro-batch: %w", err)
		}
	}
	if err := statusErr(C.t2_tree_blockmax(i32p(a.blockmax), i32p(a.send), ci(n))); err != nil {
		return fmt.Errorf("cuda: tree block maxima: %w", err)
	}
	b.n, b.headRows = n, len(hp.rowList)
	return nil
}

// attImpl is the t2_attention_* kernel selector for b.opt.Attention (validated in New).
func (b *Backend) attImpl() C.int { return attImplOf(b.opt.Attention) }

// attImplOf maps an Options.Attention value (validated and resolved, see resolveAttention) to its
// t2_attention_* selector.
func attImplOf(name string) C.int {
	switch name {
	case AttentionWMMA:
		return C.T2_ATT_WMMA
	case AttentionFA2Det:
		return C.T2_ATT_FA2_DET
	case AttentionHopper:
		return C.T2_ATT_HOPPER
	}
	return C.T2_ATT_FA2
}

func (b *Backend) forward(mb *gpu.MicroBatch, keep bool) (logp, entropy []float32, err error) {
	if err := b.enter(); err != nil {
		return nil, nil, err
	}
	defer b.leave()
	b.haveForward = false
	if err := b.uploadBatch(mb); err != nil {
		return nil, nil, err
	}
	a := &b.act
	c := b.cfg
	n, H, V := b.n, c.HiddenSize, c.VocabSize
	eps := C.float(c.RMSNormEps)
	s := b.newSeq()
	s.do("embedding", func() C.t2_status {
		return C.t2_embedding_fwd(a.xs[0], i32p(a.tokens), b.pw(b.embed), ci(n), ci(H))
	})
	var prev *layerActs // the layer whose output is still pending in prev.x2 + a.a
	for l := range c.NumHiddenLayers {
		set := 0
		if keep && !b.opt.Recompute {
			set = l
		}
		b.layerForward(&s, l, &a.layer[set], a.xs[l], prev)
		prev = &a.layer[set]
	}
	L := c.NumHiddenLayers
	s.do("final norm", func() C.t2_status {
		return C.t2_rmsnorm_fwd(a.xf, a.xs[L], f32p(a.rstdf), prev.x2, a.a, b.pw(b.norm), ci(n), ci(H), eps)
	})
	s.do("zero logp", func() C.t2_status { return C.t2_memset(a.logp, 0, csz(4*n)) })
	s.do("zero entropy", func() C.t2_status { return C.t2_memset(a.ent, 0, csz(4*n)) })
	// A head that fits one chunk leaves its logits in a.logits for Backward (logitsKept); the fused
	// head (fusedhead.go) never holds a whole row of logits, so it never keeps them.
	b.logitsKept = false
	b.headChunks(&s, func(r0, rows int) {
		if b.opt.VocabTile > 0 {
			b.headForwardTiled(&s, r0, rows)
			return
		}
		s.do("lm_head", func() C.t2_status {
			return C.t2_linear_fwd(b.ctx, a.logits, off(a.a, r0*H, 2), b.pw(b.lmHead), ci(rows), ci(H), ci(V))
		})
		s.do("log-probs", func() C.t2_status {
			return C.t2_logprob_fwd(f32p(a.logp), f32p(a.ent), f32p(a.rowLse), f32p(a.rowEnt), a.logits,
				i32p(a.tokens), i32p(a.headRow), ci(n), ci(r0), ci(rows), ci(V))
		})
	})
	if s.err != nil {
		return nil, nil, s.err
	}
	logp, entropy = make([]float32, n), make([]float32, n)
	if err := d2hF32(logp, a.logp); err != nil {
		return nil, nil, fmt.Errorf("cuda: forward: %w", err)
	}
	if err := d2hF32(entropy, a.ent); err != nil {
		return nil, nil, fmt.Errorf("cuda: forward: %w", err)
	}
	if err := s.finish("forward"); err != nil {
		return nil, nil, err
	}
	b.haveForward = keep
	b.logitsKept = keep && b.opt.VocabTile == 0 && b.headRows > 0 && b.headRows <= a.chunk
	return logp, entropy, nil
}

// headChunks gathers the head rows' final hidden states (a.xf rows a.rowList) into a.a, the layers'
// scratch, free once the last layer has run, and calls each for every chunk [r0, r0+rows) of at
// most a.chunk head rows; nothing when no node is scored.
func (b *Backend) headChunks(s *seq, each func(r0, rows int)) {
	a, R := &b.act, b.headRows
	if R == 0 {
		return
	}
	s.do("gather head rows", func() C.t2_status {
		return C.t2_gather_rows(a.a, a.xf, i32p(a.rowList), ci(R), ci(b.cfg.HiddenSize))
	})
	for r0 := 0; r0 < R; r0 += a.chunk {
		each(r0, min(a.chunk, R-r0))
	}
}

// layerForward computes decoder layer l on the residual stream xin, leaving its activations in la
// and its output as two parts: la.x2 (the stream after attention) and a.a (the MLP's down
// projection). Their sum, the next layer's input, is formed by the next RMSNorm (layer l+1's input
// norm or the final norm) as its residual input, which writes it to xs[l+1]: the same bf16 sum as a
// separate residual pass (it rounded the same two bf16 tensors) with one read of the stream fewer
// and one launch fewer per layer, as the serving decoder does. With prev non-nil, xin is written
// here first, as prev.x2 + a.a (the previous layer's pending output); with prev nil it already
// holds the input (the embedding, or a stored xs[l] when the backward pass recomputes a layer).
func (b *Backend) layerForward(s *seq, l int, la *layerActs, xin dptr, prev *layerActs) {
	a := &b.act
	c := b.cfg
	w := b.layers[l]
	n, H, I, nh, nkv, d := b.n, c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	QD, KVD := c.QDim(), c.KVDim()
	QKV := QD + 2*KVD
	eps, theta := C.float(c.RMSNormEps), C.float(c.RopeTheta)
	at := func(op string) string { return fmt.Sprintf("layer %d %s", l, op) }
	s.do(at("input_layernorm"), func() C.t2_status {
		if prev != nil {
			return C.t2_rmsnorm_fwd(la.xn1, xin, f32p(la.rstd1), prev.x2, a.a, b.pw(w.ln1), ci(n), ci(H), eps)
		}
		return C.t2_rmsnorm_fwd(la.xn1, nil, f32p(la.rstd1), xin, nil, b.pw(w.ln1), ci(n), ci(H), eps)
	})
	s.do(at("qkv_proj"), func() C.t2_status {
		return C.t2_linear_fwd(b.ctx, la.qkv, la.xn1, b.pw(w.qkv), ci(n), ci(H), ci(QKV))
	})
	s.do(at("q/k norm + rope"), func() C.t2_status {
		return C.t2_qknorm_rope_fwd(la.qr, la.kr, f32p(la.rstdq), f32p(la.rstdk), la.qkv, b.pw(w.qn), b.pw(w.kn),
			i32p(a.positions), ci(n), ci(nh), ci(nkv), ci(d), eps, theta)
	})
	s.do(at("attention"), func() C.t2_status {
		return C.t2_attention_fwd(la.att, f32p(la.lse), la.qr, la.kr, off(la.qkv, QD+KVD, 2), ci(QD), ci(KVD), ci(QKV),
			i32p(a.send), i32p(a.blockmax), ci(n), ci(nh), ci(nkv), ci(d), b.attImpl())
	})
	s.do(at("o_proj"), func() C.t2_status {
		return C.t2_linear_fwd(b.ctx, a.a, la.att, b.pw(w.o), ci(n), ci(QD), ci(H))
	})
	s.do(at("post_attention_layernorm"), func() C.t2_status {
		return C.t2_rmsnorm_fwd(la.xn2, la.x2, f32p(la.rstd2), xin, a.a, b.pw(w.ln2), ci(n), ci(H), eps)
	})
	s.do(at("gate_up_proj"), func() C.t2_status {
		return C.t2_linear_fwd(b.ctx, la.gu, la.xn2, b.pw(w.gu), ci(n), ci(H), ci(2*I))
	})
	s.do(at("swiglu"), func() C.t2_status { return C.t2_swiglu_fwd(la.h, la.gu, ci(n), ci(I)) })
	s.do(at("down_proj"), func() C.t2_status {
		return C.t2_linear_fwd(b.ctx, a.a, la.h, b.pw(w.down), ci(n), ci(I), ci(H))
	})
}

func (b *Backend) backward(dlogp []float32) error {
	a := &b.act
	c := b.cfg
	n, H, V := b.n, c.HiddenSize, c.VocabSize
	if err := h2dF32(a.dlogp, dlogp); err != nil {
		return fmt.Errorf("cuda: backward: upload dlogp: %w", err)
	}
	s := b.newSeq()
	// The first backward pass after a Step overwrites the gradients Step left (gradsStale): wBeta
	// is the weight-gradient GEMMs' beta, and what they do not write is zeroed here.
	first := b.gradsStale
	b.gradsStale = false
	wBeta := C.float(1)
	if first {
		wBeta = 0
		s.do("zero norm gradients", func() C.t2_status {
			return C.t2_zero_spans(f32p(b.grad), (*C.int64_t)(b.normSpans), ci(b.nNormSpans))
		})
		if b.lmHead != b.embed { // the embedding's gradient is scatter-added (t2_embedding_bwd)
			s.do("zero embedding gradient", func() C.t2_status { return C.t2_memset(off(b.grad, b.embed, 4), 0, csz(4*V*H)) })
		}
		if b.headRows == 0 { // no LM-head GEMM writes its gradient
			s.do("zero lm_head gradient", func() C.t2_status { return C.t2_memset(off(b.grad, b.lmHead, 4), 0, csz(4*V*H)) })
		}
	}
	headBeta := func(r0 int) C.float { // the first chunk's write is the head's first
		if r0 == 0 {
			return wBeta
		}
		return 1
	}
	s.do("zero residual gradient", func() C.t2_status { return C.t2_memset(a.dresid, 0, csz(4*n*H)) })
	// Head rows only: their input gradient is computed into a.dresidBF (free until the final
	// norm's backward writes it), then scattered to a.dxn with zeros on every other node.
	kept := b.logitsKept
	b.logitsKept = false // the log-prob backward turns them into their gradient in place
	b.headChunks(&s, func(r0, rows int) {
		if b.opt.VocabTile > 0 {
			b.headBackwardTiled(&s, r0, rows, headBeta(r0))
			return
		}
		if !kept {
			s.do("lm_head (recomputed)", func() C.t2_status {
				return C.t2_linear_fwd(b.ctx, a.logits, off(a.a, r0*H, 2), b.pw(b.lmHead), ci(rows), ci(H), ci(V))
			})
		}
		s.do("log-prob backward", func() C.t2_status {
			return C.t2_logprob_bwd(a.logits, f32p(a.rowLse), f32p(a.logp), f32p(a.dlogp), i32p(a.tokens),
				i32p(a.childOff), i32p(a.childIdx), ci(r0), ci(rows), 0, ci(V))
		})
		s.do("lm_head backward (input)", func() C.t2_status {
			return C.t2_linear_bwd_x(b.ctx, off(a.dresidBF, r0*H, 2), a.logits, b.pw(b.lmHead), ci(rows), ci(H), ci(V))
		})
		s.do("lm_head backward (weight)", func() C.t2_status {
			return C.t2_linear_bwd_w(b.ctx, b.gw(b.lmHead), a.logits, off(a.a, r0*H, 2), ci(rows), ci(H), ci(V),
				headBeta(r0))
		})
	})
	s.do("scatter head-row gradients", func() C.t2_status {
		if b.headRows == 0 {
			return C.t2_memset(a.dxn, 0, csz(2*n*H))
		}
		return C.t2_gather_rows(a.dxn, a.dresidBF, i32p(a.rowOf), ci(n), ci(H))
	})
	L := c.NumHiddenLayers
	s.do("final norm backward", func() C.t2_status {
		return C.t2_rmsnorm_bwd(f32p(a.dresid), a.dresidBF, b.gw(b.norm), a.dxn, a.xs[L], f32p(a.rstdf),
			b.pw(b.norm), ci(n), ci(H))
	})
	for l := L - 1; l >= 0; l-- {
		set := l
		if b.opt.Recompute {
			set = 0
			b.layerForward(&s, l, &a.layer[0], a.xs[l], nil)
		}
		b.layerBackward(&s, l, &a.layer[set], a.xs[l], wBeta)
	}
	s.do("embedding backward", func() C.t2_status {
		return C.t2_embedding_bwd(b.gw(b.embed), i32p(a.tokens), f32p(a.dresid), ci(n), ci(H))
	})
	err := s.finish("backward")
	if err != nil && first {
		// Some tensors were overwritten, others still hold what Step left: zero them all, the
		// value they stood for before this pass.
		b.gradsStale = true
		err = errors.Join(err, b.clearStaleGrads())
	}
	return err
}

// layerBackward back-propagates a.dresid (the gradient of the layer's output) through layer l,
// accumulating parameter gradients (the weight GEMMs' beta is wBeta: 0 overwrites) and leaving
// the gradient of the layer's input in a.dresid.
func (b *Backend) layerBackward(s *seq, l int, la *layerActs, xin dptr, wBeta C.float) {
	a := &b.act
	c := b.cfg
	w := b.layers[l]
	n, H, I, nh, nkv, d := b.n, c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	QD, KVD := c.QDim(), c.KVDim()
	QKV := QD + 2*KVD
	theta := C.float(c.RopeTheta)
	at := func(op string) string { return fmt.Sprintf("layer %d %s backward", l, op) }
	s.do(at("down_proj"), func() C.t2_status {
		return C.t2_linear_bwd_x(b.ctx, a.dh, a.dresidBF, b.pw(w.down), ci(n), ci(I), ci(H))
	})
	s.do(at("down_proj weight"), func() C.t2_status {
		return C.t2_linear_bwd_w(b.ctx, b.gw(w.down), a.dresidBF, la.h, ci(n), ci(I), ci(H), wBeta)
	})
	s.do(at("swiglu"), func() C.t2_status { return C.t2_swiglu_bwd(a.dgu, a.dh, la.gu, ci(n), ci(I)) })
	s.do(at("gate_up_proj"), func() C.t2_status {
		return C.t2_linear_bwd_x(b.ctx, a.dxn, a.dgu, b.pw(w.gu), ci(n), ci(H), ci(2*I))
	})
	s.do(at("gate_up_proj weight"), func() C.t2_status {
		return C.t2_linear_bwd_w(b.ctx, b.gw(w.gu), a.dgu, la.xn2, ci(n), ci(H), ci(2*I), wBeta)
	})
	s.do(at("post_attention_layernorm"), func() C.t2_status {
		return C.t2_rmsnorm_bwd(f32p(a.dresid), a.dresidBF, b.gw(w.ln2), a.dxn, la.x2, f32p(la.rstd2), b.pw(w.ln2),
			ci(n), ci(H))
	})
	s.do(at("o_proj"), func() C.t2_status {
		return C.t2_linear_bwd_x(b.ctx, a.datt, a.dresidBF, b.pw(w.o), ci(n), ci(QD), ci(H))
	})
	s.do(at("o_proj weight"), func() C.t2_status {
		return C.t2_linear_bwd_w(b.ctx, b.gw(w.o), a.dresidBF, la.att, ci(n), ci(QD), ci(H), wBeta)
	})
	s.do(at("attention"), func() C.t2_status {
		return C.t2_attention_bwd(f32p(a.dq), a.dk, ci(KVD), off(a.dqkv, QD+KVD, 2), ci(QKV), f32p(a.di), a.dqBF, a.datt, la.att,
			f32p(la.lse), la.qr, la.kr, off(la.qkv, QD+KVD, 2), ci(QD), ci(KVD), ci(QKV), i32p(a.send),
			i32p(a.blockmax), ci(n), ci(nh), ci(nkv), ci(d), b.attImpl())
	})
	s.do(at("q/k norm + rope"), func() C.t2_status {
		return C.t2_qknorm_rope_bwd(a.dqkv, b.gw(w.qn), b.gw(w.kn), f32p(a.dq), a.dk, la.qkv, f32p(la.rstdq),
			f32p(la.rstdk), b.pw(w.qn), b.pw(w.kn), i32p(a.positions), ci(n), ci(nh), ci(nkv), ci(d), theta)
	})
	s.do(at("qkv_proj"), func() C.t2_status {
		return C.t2_linear_bwd_x(b.ctx, a.dxn, a.dqkv, b.pw(w.qkv), ci(n), ci(H), ci(QKV))
	})
	s.do(at("qkv_proj weight"), func() C.t2_status {
		return C.t2_linear_bwd_w(b.ctx, b.gw(w.qkv), a.dqkv, la.xn1, ci(n), ci(H), ci(QKV), wBeta)
	})
	s.do(at("input_layernorm"), func() C.t2_status {
		return C.t2_rmsnorm_bwd(f32p(a.dresid), a.dresidBF, b.gw(w.ln1), a.dxn, xin, f32p(la.rstd1), b.pw(w.ln1),
			ci(n), ci(H))
	})
}
