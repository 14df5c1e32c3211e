//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

// The fused LM head (Options.VocabTile > 0) computes the same log-probs, entropies and gradients
// as the chunked head in layer.go without ever holding a chunk's [rows, vocab_size] logits: per
// chunk of head rows it walks the vocabulary in tiles of VocabTile columns.
//
// Forward, per tile [v0, v0+w): cuBLAS writes the tile's bf16 logits X·W[v0:v0+w]ᵀ (W is
// [V, H] row-major, so the tile's weights are rows v0… of it), t2_logprob_tile_fwd folds them into
// each row's running (max, Σe^(x−max), Σe^(x−max)·x) and stores the bf16 target logit of every
// scored child whose token is in the tile (in logp); after the last tile t2_logprob_tile_finish
// writes row_lse, row_ent and the children's log-probs and entropies exactly where t2_logprob_fwd
// would, so Backward's inputs and everything downstream are unchanged. Only the fp32 order of the
// log-sum-exp sums differs from the one-pass kernel.
//
// Backward, per tile: the tile's logits are recomputed (one more LM-head GEMM than the chunked
// path when that path keeps Forward's logits), t2_logprob_bwd turns them into their gradient in
// place (it needs only the row's lse and its children, not the other tiles), the input gradient
// is accumulated in fp32 across tiles (t2_linear_bwd_x_f32, beta 0 for the first tile and 1 after)
// and rounded to bf16 once at the end, and the weight gradient of rows [v0, v0+w) of the LM head
// accumulates as before (t2_linear_bwd_w at an offset).
//
// Memory: the tile [chunk, VocabTile] bf16, the fp32 input gradient [chunk, H] and the per-row
// state [chunk, 3] replace the [chunk, V] logits: at Qwen3-1.7B's shape with 16k head rows and
// 16384-column tiles, 0.54 GB + 0.13 GB instead of 5 GB. The chunked path stays the default
// because it is faster whenever its logits fit.

// vocabTiles calls each for every vocabulary tile [v0, v0+w) of Options.VocabTile columns, in
// column order (t2_logprob_tile_fwd starts each row's state at v0 = 0); the last tile is
// narrower when the vocabulary is not a multiple of the tile.
func (b *Backend) vocabTiles(each func(v0, w int)) {
	V, vt := b.cfg.VocabSize, b.opt.VocabTile
	for v0 := 0; v0 < V; v0 += vt {
		each(v0, min(vt, V-v0))
	}
}

// headForwardTiled is the fused head's forward pass over head rows [r0, r0+rows) (gathered in
// a.a by headChunks): logp, ent, rowLse and rowEnt as the chunked forward leaves them.
func (b *Backend) headForwardTiled(s *seq, r0, rows int) {
	a, H := &b.act, b.cfg.HiddenSize
	x := off(a.a, r0*H, 2)
	b.vocabTiles(func(v0, w int) {
		s.do("lm_head tile", func() C.t2_status {
			return C.t2_linear_fwd(b.ctx, a.logits, x, b.pw(b.lmHead+v0*H), ci(rows), ci(H), ci(w))
		})
		s.do("log-prob tile", func() C.t2_status {
			return C.t2_logprob_tile_fwd(f32p(a.headState), f32p(a.logp), a.logits, i32p(a.tokens), i32p(a.childOff),
				i32p(a.childIdx), ci(r0), ci(rows), ci(v0), ci(w))
		})
	})
	s.do("log-prob finish", func() C.t2_status {
		return C.t2_logprob_tile_finish(f32p(a.logp), f32p(a.ent), f32p(a.rowLse), f32p(a.rowEnt), f32p(a.headState),
			i32p(a.childOff), i32p(a.childIdx), ci(r0), ci(rows))
	})
}

// headBackwardTiled is the fused head's backward pass over head rows [r0, r0+rows): the LM-head
// weight gradient accumulates into its gradient buffer (wBeta 0: overwrites it, the first write
// after a Step), and the rows' input gradient lands in a.dresidBF rows r0… (bf16), where the
// chunked backward leaves it.
func (b *Backend) headBackwardTiled(s *seq, r0, rows int, wBeta C.float) {
	a, H := &b.act, b.cfg.HiddenSize
	x := off(a.a, r0*H, 2)
	b.vocabTiles(func(v0, w int) {
		wt := b.pw(b.lmHead + v0*H)
		beta := C.float(1)
		if v0 == 0 {
			beta = 0
		}
		s.do("lm_head tile (recomputed)", func() C.t2_status {
			return C.t2_linear_fwd(b.ctx, a.logits, x, wt, ci(rows), ci(H), ci(w))
		})
		s.do("log-prob backward", func() C.t2_status {
			return C.t2_logprob_bwd(a.logits, f32p(a.rowLse), f32p(a.logp), f32p(a.dlogp), i32p(a.tokens),
				i32p(a.childOff), i32p(a.childIdx), ci(r0), ci(rows), ci(v0), ci(w))
		})
		s.do("lm_head backward (input)", func() C.t2_status {
			return C.t2_linear_bwd_x_f32(b.ctx, f32p(a.headDX), a.logits, wt, ci(rows), ci(H), ci(w), beta)
		})
		s.do("lm_head backward (weight)", func() C.t2_status {
			return C.t2_linear_bwd_w(b.ctx, b.gw(b.lmHead+v0*H), a.logits, x, ci(rows), ci(H), ci(w), wBeta)
		})
	})
	s.do("lm_head input gradient to bf16", func() C.t2_status {
		return C.t2_f32_to_bf16(off(a.dresidBF, r0*H, 2), f32p(a.headDX), csz(rows*H))
	})
}
