package cpu

import (
	"errors"
	"fmt"
	"math"

	"tau2rl/gpu"
)

// Decoder is the pure-Go gpu.Decoder: the same Qwen3 layer loop as the training forward pass
// (model.forward), with the tree attention replaced by attention over a paged KV cache. It serves
// the sampler's engine in CI and on machines without a GPU, and is the reference the CUDA decoder
// is checked against.
//
// Every row of a step is computed independently of the others (each matmul row, norm row and
// attention query is its own loop, in the same order as the training forward pass), so a token's
// hidden state — and hence its logits and log-prob — is bit-identical whether it was computed in a
// one-shot prefill, a prefill chunk, a decode step, alone or batched. That is what lets the
// sampler's invariance tests compare outputs exactly.
type Decoder struct {
	m      *model[float32]
	kv     gpu.KVCacheSpec
	k, v   [][]float32 // per layer: [NumBlocks·BlockSize, num_key_value_heads, head_dim], keys after q/k-norm and RoPE
	closed bool
}

var _ gpu.Decoder = (*Decoder)(nil)

// NewDecoder builds a decoder holding a copy of w and a zeroed KV cache of the given geometry.
func NewDecoder(w *gpu.Weights, kv gpu.KVCacheSpec) (*Decoder, error) {
	if err := kv.Validate(); err != nil {
		return nil, fmt.Errorf("cpu: decoder: %w", err)
	}
	m, err := newServeModel(w)
	if err != nil {
		return nil, err
	}
	d := &Decoder{m: m, kv: kv, k: make([][]float32, w.Config.NumHiddenLayers), v: make([][]float32, w.Config.NumHiddenLayers)}
	slots := kv.Tokens() * w.Config.KVDim()
	for l := range d.k {
		d.k[l], d.v[l] = make([]float32, slots), make([]float32, slots)
	}
	return d, nil
}

// newServeModel is newModel without gradient buffers (a decoder never trains).
func newServeModel(w *gpu.Weights) (*model[float32], error) {
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	_, n := layout(w.Config)
	m := &model[float32]{cfg: w.Config, params: make([]float32, n)}
	m.p = views(w.Config, m.params)
	m.copyIn(w)
	m.invFreq = ropeInvFreq(w.Config.RopeTheta, w.Config.HeadDim)
	return m, nil
}

// copyIn copies w's tensors (already checked against m's config) into the parameters.
func (m *model[T]) copyIn(w *gpu.Weights) {
	for name, dst := range m.p.byName {
		for i, v := range w.Tensors[name] {
			dst[i] = T(v)
		}
	}
}

var errDecoderClosed = errors.New("cpu: decoder is closed")

// Config returns the model configuration.
func (d *Decoder) Config() gpu.Config { return d.m.cfg }

// KVSpec returns the cache geometry.
func (d *Decoder) KVSpec() gpu.KVCacheSpec { return d.kv }

// LoadWeights replaces the weights; on any error the old ones keep serving.
func (d *Decoder) LoadWeights(w *gpu.Weights) error {
	if d.closed {
		return errDecoderClosed
	}
	if w == nil {
		return errors.New("cpu: decoder: nil weights")
	}
	if err := gpu.SameArchitecture(d.m.cfg, w.Config); err != nil {
		return fmt.Errorf("cpu: decoder: %w", err)
	}
	if err := w.Check(); err != nil {
		return fmt.Errorf("cpu: decoder: %w", err)
	}
	d.m.copyIn(w)
	return nil
}

// Close releases the weights and the cache.
func (d *Decoder) Close() error {
	d.closed = true
	d.k, d.v = nil, nil
	return nil
}

// Step runs one batch of prefill chunks and decode tokens (see gpu.Decoder).
func (d *Decoder) Step(seqs []gpu.ServeSeq) ([]gpu.Sampled, error) {
	if d.closed {
		return nil, errDecoderClosed
	}
	c := d.m.cfg
	if err := gpu.ValidateServeStep(c, d.kv, seqs); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	N := 0
	for _, s := range seqs {
		N += len(s.Tokens)
	}
	H, KV := c.HiddenSize, c.KVDim()
	nh, nkv, hd, eps := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.RMSNormEps
	B := d.kv.BlockSize

	// Row r of the step is token tokens[r] of sequence rowSeq[r] at position positions[r]; its
	// key/value slot in the pool is slot[r].
	tokens := make([]int32, 0, N)
	positions := make([]int32, 0, N)
	rowSeq := make([]int32, 0, N)
	slot := make([]int, 0, N)
	for si, s := range seqs {
		for j, t := range s.Tokens {
			p := s.Start + j
			tokens = append(tokens, t)
			positions = append(positions, int32(p))
			rowSeq = append(rowSeq, int32(si))
			slot = append(slot, int(s.Blocks[p/B])*B+p%B)
		}
	}
	cos, sin := ropeTables[float32](positions, d.m.invFreq)
	la := newLayerActs[float32](c, N)
	x := make([]float32, N*H)
	embeddingForward(x, d.m.p.embed, tokens, H)
	for l, lp := range d.m.p.layers {
		layerIn(c, &la, lp, x, cos, sin, N)
		kc, vc := d.k[l], d.v[l]
		for r, sl := range slot {
			copy(kc[sl*KV:(sl+1)*KV], la.kr[r*KV:(r+1)*KV])
			copy(vc[sl*KV:(sl+1)*KV], la.v[r*KV:(r+1)*KV])
		}
		pagedAttention(la.att, la.qr, kc, vc, seqs, rowSeq, positions, B, nh, nkv, hd)
		layerOut(c, &la, lp, x, N)
	}

	// The language-model head runs only on the last row of each sequence that samples.
	var out []gpu.Sampled
	f, rstd := make([]float32, H), make([]float32, 1)
	logits := make([]float32, c.VocabSize)
	row := 0
	for _, s := range seqs {
		row += len(s.Tokens)
		if !s.Sample {
			continue
		}
		last := row - 1
		rmsnormForward(f, rstd, x[last*H:(last+1)*H], d.m.p.norm, 1, H, eps)
		headLogits(logits, f, d.m.p.lmHead, H, c.VocabSize)
		out = append(out, gpu.SampleLogits(logits, s.Params, s.Uniform))
	}
	return out, nil
}

// headLogits sets logits[v] = W_v·f over the vocabulary, split over the vocabulary (one row of a
// large head has enough work for every core). Each logit is the same dot product the training
// head computes, so log-probs agree with Backend.LogProbs to the last bit of the logits.
func headLogits(logits, f, w []float32, H, V int) {
	parallelFor(V, grainFor(H), func(lo, hi int) {
		for v := lo; v < hi; v++ {
			logits[v] = dot(f, w[v*H:(v+1)*H])
		}
	})
}

// pagedAttention is attentionForward for a chain per sequence whose keys and values live in the
// paged cache: query row r (sequence rowSeq[r], position positions[r]) attends to positions
// 0..positions[r] of its sequence, read through its block table. The arithmetic (score rounding,
// running max, float64 sums, key order) is attentionForward's, so results match it exactly.
func pagedAttention(out, q, kc, vc []float32, seqs []gpu.ServeSeq, rowSeq, positions []int32, B, nh, nkv, d int) {
	group := nh / nkv
	scale := 1 / math.Sqrt(float64(d))
	KV := nkv * d
	N := len(rowSeq)
	parallelFor(N, grainFor(int(positions[N-1]+1)*nh*d), func(lo, hi int) {
		var sc []float64
		acc := make([]float64, d)
		for i := lo; i < hi; i++ {
			blocks := seqs[rowSeq[i]].Blocks
			n := int(positions[i]) + 1
			if cap(sc) < n {
				sc = make([]float64, n)
			}
			sc = sc[:n]
			for h := range nh {
				kh := h / group
				qr := q[(i*nh+h)*d : (i*nh+h+1)*d]
				m := math.Inf(-1)
				for j := range n {
					sl := int(blocks[j/B])*B + j%B
					s := float64(dot(qr, kc[sl*KV+kh*d:sl*KV+(kh+1)*d]) * float32(scale))
					sc[j] = s
					m = max(m, s)
				}
				var sum float64
				clear(acc)
				for j := range n {
					p := math.Exp(sc[j] - m)
					sum += p
					sl := int(blocks[j/B])*B + j%B
					vr := vc[sl*KV+kh*d : sl*KV+(kh+1)*d]
					for x := range d {
						acc[x] += p * float64(vr[x])
					}
				}
				or := out[(i*nh+h)*d : (i*nh+h+1)*d]
				for x := range d {
					or[x] = float32(acc[x] / sum)
				}
			}
		}
	})
}
