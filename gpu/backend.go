// Package gpu is the contract between the trainer and the model backends that compute a Qwen3
// policy's per-token log-probabilities, their gradients, and the optimizer step.
//
// Two backends implement Backend with the same numbers (up to precision):
//   - gpu/cpu: a pure-Go fp32 reference, used by CI, laptops and as the correctness oracle;
//   - gpu/cuda: cgo + CUDA behind the `cuda` build tag, used for real training.
//
// The package is pure compute: it knows nothing of Kafka, Arrow or the trainer's data. It also holds
// the pieces both backends share so they agree bit for bit on their inputs: the model Config (a
// Hugging Face config.json), the canonical Qwen3 tensor names and shapes, seeded random
// initialization, and loading/saving Hugging Face safetensors checkpoints (see weights.go).
package gpu

import (
	"fmt"
)

// MicroBatch is one packed prefix-tree micro-batch. Nodes are in depth-first (pre-)order, so every
// ancestor precedes its descendants and each subtree is a contiguous range. Mask rule (no N×N
// matrix): key j is visible to query i  ⇔  j ≤ i ≤ SubtreeEnd[j].
//
// The log-prob of node c's token is computed from the model's output at Parent[c]:
// logp[c] = log_softmax(lm_head(h[Parent[c]]))[Tokens[c]]; roots get logp 0 and entropy 0.
// Entropy[c] is the entropy of that same distribution. This makes every node carry exactly one
// scored token, whatever the branching, and lets the trainer sum per-sequence loss terms onto nodes.
//
// A plain (unpacked) sequence is the degenerate tree Parent[i] = i-1, SubtreeEnd[i] = n-1,
// Positions[i] = i; see Chain. Several independent trees may share one micro-batch (several roots).
type MicroBatch struct {
	Tokens     []int32 // token id per node
	Positions  []int32 // RoPE position = depth of the node in its original sequence(s) (0-based)
	Parent     []int32 // index of the parent node, -1 for a root (a sequence start)
	SubtreeEnd []int32 // index of the last node in i's subtree (i itself for a leaf)
	// Score optionally marks the nodes whose log-prob and entropy the caller needs (nil: all).
	// Backends may skip the language-model head for the others and return 0 there. In RL batches
	// only completion tokens carry loss, so most of a τ² tree (system prompt, tool schemas, user and
	// tool turns) needs no head, which is the largest single cost for a 151,936-token vocabulary.
	// Backward ignores dlogp on unscored nodes, so they must carry no loss.
	Score []bool
}

// Scored reports whether node i's log-prob is needed (see MicroBatch.Score).
func (mb *MicroBatch) Scored(i int) bool { return mb.Score == nil || mb.Score[i] }

// Backend computes a Qwen3 dense causal LM over packed prefix-tree micro-batches and trains it.
// A Backend is not safe for concurrent use: the trainer drives it from one goroutine.
type Backend interface {
	// Config returns the model configuration the backend was built with.
	Config() Config
	// LogProbs runs the forward pass without keeping activations (proximal log-probs, evaluation).
	LogProbs(mb *MicroBatch) (logp, entropy []float32, err error)
	// Forward runs the forward pass keeping what Backward needs (or recomputing it, if activation
	// recomputation is on) and returns per-node log-probs and entropies.
	Forward(mb *MicroBatch) (logp, entropy []float32, err error)
	// Backward accumulates into the parameter gradients d/dθ Σ_c dlogp[c]·logp[c] for the micro-batch
	// of the last Forward. Gradients accumulate across micro-batches until Step. dlogp of roots is
	// ignored (a root has no scored token).
	Backward(dlogp []float32) error
	// Step clips the global gradient norm to opt.MaxGradNorm, applies AdamW (decoupled weight decay,
	// bias correction, torch.optim.AdamW semantics) to the fp32 master weights, zeroes gradients,
	// and returns the pre-clip gradient norm.
	Step(opt Optimizer) (gradNorm float64, err error)
	// Save writes Hugging Face safetensors (Qwen3 tensor names: model.embed_tokens.weight,
	// model.layers.N.self_attn.{q,k,v,o}_proj.weight, …q_norm.weight, k_norm.weight,
	// input_layernorm, post_attention_layernorm, mlp.{gate,up,down}_proj.weight, model.norm.weight,
	// lm_head.weight unless tied) plus config.json into dir, loadable unchanged by transformers,
	// SGLang and vLLM.
	Save(dir string, dtype DType) error
	// Close releases the backend's memory (device memory for CUDA). The backend is unusable after.
	Close() error
}

// WeightExporter is implemented by backends that can hand their current fp32 master weights back
// to the host, so tests can compare two backends parameter by parameter after the same steps.
// It is optional: callers type-assert.
type WeightExporter interface {
	Weights() (*Weights, error)
}

// OptimizerStateSaver is implemented by backends that can persist their training state beyond
// the Hugging Face weights, so that a trainer restarted from a checkpoint continues the exact
// optimization it would have run without the restart. It is optional (callers type-assert, and a
// trainer whose backend lacks it restarts AdamW from zero and says so), because Backend is the
// contract every backend must meet and this one is only needed for resume.
//
// SaveOptimizerState writes OptimizerStateFile into dir (a checkpoint directory that Save has
// written or will write), atomically: a safetensors file, readable by any safetensors tool and
// convertible to torch.optim.AdamW's state_dict by parameter name. For every parameter <name> of
// ParamSpecs(cfg) (Hugging Face names; lm_head absent when embeddings are tied) it holds three F32
// tensors of the parameter's shape:
//
//	<name>.exp_avg     AdamW first moment m  (torch: state[p]["exp_avg"])
//	<name>.exp_avg_sq  AdamW second moment v (torch: state[p]["exp_avg_sq"])
//	<name>.master      the fp32 master weights
//
// The master weights are there because checkpoints are usually saved in bfloat16 for the
// inference servers: resuming from those rounded weights would change the trajectory of training
// even with the moments restored. The __metadata__ holds "format" (OptimizerStateFormat),
// "format_version" (OptimizerStateFormatVersion), "optimizer" ("adamw") and "step": the number of
// AdamW steps taken, the t of bias correction (torch: state[p]["step"], equal for every p).
//
// LoadOptimizerState reads dir's OptimizerStateFile into a backend of the same model config,
// replacing its moments, step count and master weights (so it is called after the backend was
// built from the same checkpoint's weights). A missing or corrupt file, a different format, a
// missing, extra or mis-shaped tensor, a non-F32 tensor, a non-finite value or a negative
// exp_avg_sq is an error that leaves the backend unchanged.
type OptimizerStateSaver interface {
	SaveOptimizerState(dir string) error
	LoadOptimizerState(dir string) error
}

// The on-disk names of the optimizer state (see OptimizerStateSaver), shared so every backend
// writes and reads the same file.
const (
	OptimizerStateFile          = "optimizer.safetensors"
	OptimizerStateFormat        = "tau2rl.adamw"
	OptimizerStateFormatVersion = "1"
	SuffixExpAvg                = ".exp_avg"
	SuffixExpAvgSq              = ".exp_avg_sq"
	SuffixMaster                = ".master"
)

// Optimizer holds the AdamW hyper-parameters of one Step. The trainer may change LR between steps
// (schedules live in the trainer); the step counter used for bias correction lives in the backend.
type Optimizer struct {
	LR          float64 `yaml:"lr"`            // learning rate; default 1.7e-5 (AReaL τ² 1.7B)
	Beta1       float64 `yaml:"beta1"`         // first-moment decay; default 0.9
	Beta2       float64 `yaml:"beta2"`         // second-moment decay; default 0.999
	Eps         float64 `yaml:"eps"`           // denominator epsilon; default 1e-8
	WeightDecay float64 `yaml:"weight_decay"`  // decoupled weight decay (applied to every tensor); default 0.017
	MaxGradNorm float64 `yaml:"max_grad_norm"` // global L2 clip; ≤ 0 disables clipping; default 1.0
	// The learning-rate schedule (schedule.go). Backends use LR as given: the trainers pass
	// At(step, total), whose LR is the scheduled one.
	LRSchedule  string  `yaml:"lr_schedule"`  // constant (default), cosine or linear decay over the run's steps
	WarmupSteps int64   `yaml:"warmup_steps"` // linear warm-up from 0 to lr over this many steps; default 0
	MinLRRatio  float64 `yaml:"min_lr_ratio"` // floor of the cosine/linear decay as a fraction of lr; default 0
}

// DefaultOptimizer returns AReaL's τ² (Qwen3-1.7B) optimizer settings: Adam lr 1.7e-5, weight decay
// 0.017, constant schedule, gradient clip 1.0, with torch's default betas (0.9, 0.999) and eps 1e-8.
func DefaultOptimizer() Optimizer {
	return Optimizer{LR: 1.7e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.017, MaxGradNorm: 1.0, LRSchedule: ScheduleConstant}
}

// Validate reports hyper-parameters AdamW cannot run with.
func (o Optimizer) Validate() error {
	switch {
	case !(o.LR >= 0):
		return fmt.Errorf("gpu: optimizer lr %v must be ≥ 0", o.LR)
	case !(o.Beta1 >= 0 && o.Beta1 < 1):
		return fmt.Errorf("gpu: optimizer beta1 %v must be in [0,1)", o.Beta1)
	case !(o.Beta2 >= 0 && o.Beta2 < 1):
		return fmt.Errorf("gpu: optimizer beta2 %v must be in [0,1)", o.Beta2)
	case !(o.Eps > 0):
		return fmt.Errorf("gpu: optimizer eps %v must be > 0", o.Eps)
	case !(o.WeightDecay >= 0):
		return fmt.Errorf("gpu: optimizer weight_decay %v must be ≥ 0", o.WeightDecay)
	case o.MaxGradNorm != o.MaxGradNorm:
		return fmt.Errorf("gpu: optimizer max_grad_norm is NaN")
	}
	return o.validateSchedule()
}

// DType is a checkpoint tensor element type, spelled as Hugging Face's torch_dtype.
type DType string

// Checkpoint element types. Training keeps fp32 master weights whatever the saved type.
const (
	BF16 DType = "bfloat16"
	F16  DType = "float16"
	F32  DType = "float32"
)

// ParseDType accepts the torch_dtype spellings and the safetensors ones (BF16, F16, F32).
func ParseDType(s string) (DType, error) {
	switch s {
	case "bfloat16", "bf16", "BF16":
		return BF16, nil
	case "float16", "fp16", "half", "F16":
		return F16, nil
	case "float32", "fp32", "float", "F32":
		return F32, nil
	}
	return "", fmt.Errorf("gpu: unknown dtype %q (want bfloat16, float16 or float32)", s)
}

// Len is the number of nodes (tokens) in the micro-batch.
func (mb *MicroBatch) Len() int { return len(mb.Tokens) }

// Chain returns the micro-batch of one plain sequence (a tree with a single path), the unpacked
// baseline that tree-packed results must equal.
func Chain(tokens []int32) *MicroBatch {
	n := len(tokens)
	mb := &MicroBatch{
		Tokens:     append([]int32(nil), tokens...),
		Positions:  make([]int32, n),
		Parent:     make([]int32, n),
		SubtreeEnd: make([]int32, n),
	}
	for i := range n {
		mb.Positions[i] = int32(i)
		mb.Parent[i] = int32(i - 1)
		mb.SubtreeEnd[i] = int32(n - 1)
	}
	return mb
}

// Validate checks that the micro-batch is a well-formed pre-order forest whose SubtreeEnd agrees
// with Parent and whose positions are depths (a child sits one position after its parent). vocab,
// if positive, bounds the token ids. Backends call it before touching memory, so a malformed batch
// is an error, never an out-of-range access.
func (mb *MicroBatch) Validate(vocab int) error {
	n := len(mb.Tokens)
	if n == 0 {
		return fmt.Errorf("gpu: empty micro-batch")
	}
	if len(mb.Positions) != n || len(mb.Parent) != n || len(mb.SubtreeEnd) != n {
		return fmt.Errorf("gpu: micro-batch lengths differ: tokens %d positions %d parent %d subtree_end %d",
			n, len(mb.Positions), len(mb.Parent), len(mb.SubtreeEnd))
	}
	if mb.Score != nil && len(mb.Score) != n {
		return fmt.Errorf("gpu: micro-batch score mask has %d entries for %d nodes", len(mb.Score), n)
	}
	// stack holds the path from the current root to node i-1; a pre-order child's parent must be on it.
	stack := make([]int32, 0, 64)
	for i := range n {
		t, p, pos := mb.Tokens[i], mb.Parent[i], mb.Positions[i]
		if t < 0 || (vocab > 0 && int(t) >= vocab) {
			return fmt.Errorf("gpu: node %d: token %d outside vocabulary [0,%d)", i, t, vocab)
		}
		if pos < 0 {
			return fmt.Errorf("gpu: node %d: negative position %d", i, pos)
		}
		if p == -1 {
			stack = stack[:0]
		} else {
			if p < 0 || int(p) >= i {
				return fmt.Errorf("gpu: node %d: parent %d must be -1 or an earlier node", i, p)
			}
			for len(stack) > 0 && stack[len(stack)-1] != p {
				stack = stack[:len(stack)-1]
			}
			if len(stack) == 0 {
				return fmt.Errorf("gpu: node %d: parent %d is not an ancestor of node %d, so nodes are not in pre-order", i, p, i-1)
			}
			if pos != mb.Positions[p]+1 {
				return fmt.Errorf("gpu: node %d: position %d, want parent %d's position %d + 1", i, pos, p, mb.Positions[p])
			}
		}
		stack = append(stack, int32(i))
	}
	end := make([]int32, n)
	for i := range n {
		end[i] = int32(i)
	}
	for i := n - 1; i >= 0; i-- {
		if p := mb.Parent[i]; p >= 0 && end[i] > end[p] {
			end[p] = end[i]
		}
	}
	for i := range n {
		if mb.SubtreeEnd[i] != end[i] {
			return fmt.Errorf("gpu: node %d: subtree_end %d, but its subtree ends at %d", i, mb.SubtreeEnd[i], end[i])
		}
	}
	return nil
}
