package gpu

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"tau2rl/gpu/internal/par"
	"tau2rl/gpu/safetensors"
	"tau2rl/lib/durable"
)

// ParamSpec names one parameter tensor of the model with its Hugging Face name and shape (torch
// layout: a Linear weight is [out, in]).
type ParamSpec struct {
	Name  string
	Shape []int
	// Norm is true for RMSNorm weights, which initialize to ones.
	Norm bool
}

// Size is the number of elements.
func (p ParamSpec) Size() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Qwen3 tensor name pieces, shared by both backends so they never disagree on a spelling.
const (
	NameEmbed  = "model.embed_tokens.weight"
	NameNorm   = "model.norm.weight"
	NameLMHead = "lm_head.weight"
)

// Per-layer tensor suffixes, in canonical order; LayerName(l, s) is the full name.
var LayerTensors = []string{
	"input_layernorm.weight",
	"self_attn.q_proj.weight",
	"self_attn.k_proj.weight",
	"self_attn.v_proj.weight",
	"self_attn.q_norm.weight",
	"self_attn.k_norm.weight",
	"self_attn.o_proj.weight",
	"post_attention_layernorm.weight",
	"mlp.gate_proj.weight",
	"mlp.up_proj.weight",
	"mlp.down_proj.weight",
}

// LayerName returns the Hugging Face name of a layer tensor, e.g. model.layers.3.mlp.up_proj.weight.
func LayerName(layer int, suffix string) string {
	return fmt.Sprintf("model.layers.%d.%s", layer, suffix)
}

// ParamSpecs lists every parameter tensor of the model in canonical order: the embedding, each
// layer's tensors in LayerTensors order, the final norm, then lm_head unless embeddings are tied.
// Backends lay out parameters, gradients and optimizer state in this order, and the global
// gradient norm sums in it.
func ParamSpecs(c Config) []ParamSpec {
	H, I, V, hd := c.HiddenSize, c.IntermediateSize, c.VocabSize, c.HeadDim
	specs := []ParamSpec{{Name: NameEmbed, Shape: []int{V, H}}}
	for l := range c.NumHiddenLayers {
		shapes := map[string][]int{
			"input_layernorm.weight":          {H},
			"self_attn.q_proj.weight":         {c.QDim(), H},
			"self_attn.k_proj.weight":         {c.KVDim(), H},
			"self_attn.v_proj.weight":         {c.KVDim(), H},
			"self_attn.q_norm.weight":         {hd},
			"self_attn.k_norm.weight":         {hd},
			"self_attn.o_proj.weight":         {H, c.QDim()},
			"post_attention_layernorm.weight": {H},
			"mlp.gate_proj.weight":            {I, H},
			"mlp.up_proj.weight":              {I, H},
			"mlp.down_proj.weight":            {H, I},
		}
		for _, s := range LayerTensors {
			specs = append(specs, ParamSpec{Name: LayerName(l, s), Shape: shapes[s], Norm: strings.HasSuffix(s, "norm.weight")})
		}
	}
	specs = append(specs, ParamSpec{Name: NameNorm, Shape: []int{H}, Norm: true})
	if !c.TieWordEmbeddings {
		specs = append(specs, ParamSpec{Name: NameLMHead, Shape: []int{V, H}})
	}
	return specs
}

// NumParams is the total number of parameters (the tied lm_head counted once).
func (c Config) NumParams() int64 {
	var n int64
	for _, s := range ParamSpecs(c) {
		n += int64(s.Size())
	}
	return n
}

// Weights is a full set of fp32 model parameters on the host, keyed by Hugging Face name. It is
// how checkpoints and random initializations reach a backend, and how tests compare backends.
type Weights struct {
	Config  Config
	Tensors map[string][]float32
}

// Check verifies that w holds exactly the tensors of ParamSpecs(w.Config) with the right sizes
// and only finite values.
func (w *Weights) Check() error {
	if err := w.Config.Validate(); err != nil {
		return err
	}
	specs := ParamSpecs(w.Config)
	if len(w.Tensors) != len(specs) {
		return fmt.Errorf("gpu: weights hold %d tensors, config wants %d", len(w.Tensors), len(specs))
	}
	for _, s := range specs {
		t, ok := w.Tensors[s.Name]
		if !ok {
			return fmt.Errorf("gpu: weights lack %s", s.Name)
		}
		if len(t) != s.Size() {
			return fmt.Errorf("gpu: weights %s has %d values, want %v = %d", s.Name, len(t), s.Shape, s.Size())
		}
		if i := firstNonFinite(t); i >= 0 {
			return fmt.Errorf("gpu: weights %s[%d] = %v is not finite", s.Name, i, t[i])
		}
	}
	return nil
}

// firstNonFinite returns the index of the first NaN or ±Inf in t, or -1. Every load, save and
// backend constructor runs it over every weight, so it scans on all cores (gpu/internal/par),
// testing the exponent bits (all ones: NaN or Inf) rather than converting to float64; the first
// index is searched for only once a chunk has been found to hold one.
func firstNonFinite(t []float32) int {
	if !par.Any(len(t), func(lo, hi int) bool { return !allFinite(t[lo:hi]) }) {
		return -1
	}
	for i, v := range t {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return i
		}
	}
	return -1
}

// allFinite reports whether t holds no NaN or ±Inf.
func allFinite(t []float32) bool {
	const exp = 0x7f800000
	for _, v := range t {
		if math.Float32bits(v)&exp == exp {
			return false
		}
	}
	return true
}

// Clone returns a deep copy.
func (w *Weights) Clone() *Weights {
	c := &Weights{Config: w.Config, Tensors: make(map[string][]float32, len(w.Tensors))}
	for k, v := range w.Tensors {
		c.Tensors[k] = slices.Clone(v)
	}
	return c
}

// InitOptions controls random initialization.
type InitOptions struct {
	// Std is the standard deviation of the normal init of embeddings and projections; 0 means the
	// config's initializer_range (transformers' _init_weights; 0.02 for Qwen3).
	Std float64
	// NormJitter, if positive, draws RMSNorm weights uniformly from [1-NormJitter, 1+NormJitter]
	// instead of transformers' ones, so tests see the norm weights act.
	NormJitter float64
}

// NewRandomWeights initializes a model as transformers' Qwen3PreTrainedModel does: projections and
// embeddings ~ N(0, initializer_range²), norm weights 1. Every tensor draws from its own PCG stream
// keyed by (seed, name) with Box–Muller normals computed here, so both backends, any Go version
// and any tensor order produce the same bits for the same seed.
func NewRandomWeights(cfg Config, seed uint64) (*Weights, error) {
	return NewRandomWeightsWith(cfg, seed, InitOptions{})
}

// NewRandomWeightsWith is NewRandomWeights with explicit options.
func NewRandomWeightsWith(cfg Config, seed uint64, opt InitOptions) (*Weights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	std := opt.Std
	if std == 0 {
		std = cfg.InitializerRange
	}
	if !(std > 0) {
		return nil, fmt.Errorf("gpu: init std %v must be > 0", std)
	}
	w := &Weights{Config: cfg, Tensors: map[string][]float32{}}
	for _, s := range ParamSpecs(cfg) {
		h := fnv.New64a()
		h.Write([]byte(s.Name))
		rng := rand.New(rand.NewPCG(seed, h.Sum64()))
		t := make([]float32, s.Size())
		switch {
		case s.Norm && opt.NormJitter > 0:
			for i := range t {
				t[i] = float32(1 + opt.NormJitter*(2*rng.Float64()-1))
			}
		case s.Norm:
			for i := range t {
				t[i] = 1
			}
		default:
			for i := 0; i < len(t); i += 2 {
				// Box–Muller: two normals from two uniforms in (0,1].
				u1 := 1 - rng.Float64()
				u2 := rng.Float64()
				r := math.Sqrt(-2 * math.Log(u1))
				t[i] = float32(std * r * math.Cos(2*math.Pi*u2))
				if i+1 < len(t) {
					t[i+1] = float32(std * r * math.Sin(2*math.Pi*u2))
				}
			}
		}
		w.Tensors[s.Name] = t
	}
	return w, nil
}

// LoadWeights reads a Hugging Face Qwen3 checkpoint directory (config.json plus model.safetensors
// or a sharded index) into fp32. A tied checkpoint that also stores lm_head.weight is accepted (the
// copy is ignored, as transformers does); any other unexpected or missing tensor, or a shape
// mismatch, is an error.
func LoadWeights(dir string) (*Weights, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	d, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("gpu: load weights %s: %w", dir, err)
	}
	defer d.Close()
	w := &Weights{Config: cfg, Tensors: map[string][]float32{}}
	specs := ParamSpecs(cfg)
	want := map[string]bool{}
	for _, s := range specs {
		want[s.Name] = true
	}
	for _, n := range d.Names() {
		if !want[n] && !(n == NameLMHead && cfg.TieWordEmbeddings) {
			return nil, fmt.Errorf("gpu: load weights %s: unexpected tensor %q for this config", dir, n)
		}
	}
	for _, s := range specs {
		vals, shape, err := d.Float32(s.Name)
		if err != nil {
			return nil, fmt.Errorf("gpu: load weights %s: %w", dir, err)
		}
		if !slices.Equal(shape, s.Shape) {
			return nil, fmt.Errorf("gpu: load weights %s: %s has shape %v, config wants %v", dir, s.Name, shape, s.Shape)
		}
		w.Tensors[s.Name] = vals
	}
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("gpu: load weights %s: %w", dir, err)
	}
	return w, nil
}

// DefaultMaxShardBytes is the shard size above which SaveCheckpoint splits the weights, as
// transformers' save_pretrained does (5 GB).
const DefaultMaxShardBytes = 5_000_000_000

// SaveCheckpoint writes a Hugging Face checkpoint directory: config.json (torch_dtype = dtype) and
// the tensors of ParamSpecs(cfg) in dtype, one model.safetensors or shards with an index. src
// supplies each tensor's fp32 values on demand, so a backend streams its weights out one tensor at
// a time. Files appear atomically (temporary name, fsync, rename).
func SaveCheckpoint(dir string, cfg Config, dtype DType, src func(name string) ([]float32, error)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	st, err := stDType(dtype)
	if err != nil {
		return err
	}
	specs := ParamSpecs(cfg)
	ts := make([]safetensors.TensorSpec, len(specs))
	for i, s := range specs {
		ts[i] = safetensors.TensorSpec{Name: s.Name, DType: st, Shape: s.Shape}
	}
	if _, err := safetensors.WriteDir(dir, ts, map[string]string{"format": "pt"}, DefaultMaxShardBytes, safetensors.Source(src)); err != nil {
		return fmt.Errorf("gpu: save checkpoint %s: %w", dir, err)
	}
	out := cfg
	out.TorchDtype = string(dtype)
	cb, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("gpu: save checkpoint %s: config: %w", dir, err)
	}
	if err := durable.WriteFile(filepath.Join(dir, "config.json"), append(cb, '\n'), 0o644); err != nil {
		return fmt.Errorf("gpu: save checkpoint %s: %w", dir, err)
	}
	return nil
}

// Save writes w as a Hugging Face checkpoint directory (see SaveCheckpoint).
func (w *Weights) Save(dir string, dtype DType) error {
	if err := w.Check(); err != nil {
		return err
	}
	return SaveCheckpoint(dir, w.Config, dtype, func(name string) ([]float32, error) {
		t, ok := w.Tensors[name]
		if !ok {
			return nil, fmt.Errorf("no tensor %s", name)
		}
		return t, nil
	})
}

// WriteRandomCheckpoint writes a randomly initialized checkpoint of cfg into dir (config.json and
// model.safetensors): the fixture for tests, `make run` and GPU parity checks.
func WriteRandomCheckpoint(dir string, cfg Config, seed uint64, opt InitOptions, dtype DType) (*Weights, error) {
	w, err := NewRandomWeightsWith(cfg, seed, opt)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	if err := w.Save(dir, dtype); err != nil {
		return nil, err
	}
	return w, nil
}

func stDType(d DType) (safetensors.DType, error) {
	switch d {
	case BF16:
		return safetensors.BF16, nil
	case F16:
		return safetensors.F16, nil
	case F32:
		return safetensors.F32, nil
	}
	return "", fmt.Errorf("gpu: cannot save dtype %q", d)
}
