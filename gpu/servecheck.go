package gpu

import "fmt"

// SameArchitecture reports whether weights of config b can replace those of a: every field that
// shapes a tensor or the forward pass must agree. Bookkeeping fields (torch_dtype, architectures,
// token ids, Extra) may differ — a trainer's bf16 checkpoint reloads a server started from fp32
// weights. Decoder.LoadWeights implementations use it so a mismatched checkpoint is rejected
// before anything is touched.
func SameArchitecture(a, b Config) error {
	type field struct {
		name string
		x, y any
	}
	for _, f := range []field{
		{"vocab_size", a.VocabSize, b.VocabSize},
		{"hidden_size", a.HiddenSize, b.HiddenSize},
		{"intermediate_size", a.IntermediateSize, b.IntermediateSize},
		{"num_hidden_layers", a.NumHiddenLayers, b.NumHiddenLayers},
		{"num_attention_heads", a.NumAttentionHeads, b.NumAttentionHeads},
		{"num_key_value_heads", a.NumKeyValueHeads, b.NumKeyValueHeads},
		{"head_dim", a.HeadDim, b.HeadDim},
		{"tie_word_embeddings", a.TieWordEmbeddings, b.TieWordEmbeddings},
		{"rms_norm_eps", a.RMSNormEps, b.RMSNormEps},
		{"rope_theta", a.RopeTheta, b.RopeTheta},
		{"max_position_embeddings", a.MaxPositionEmbeddings, b.MaxPositionEmbeddings},
		{"hidden_act", a.HiddenAct, b.HiddenAct},
	} {
		if f.x != f.y {
			return fmt.Errorf("gpu: config mismatch: %s is %v, the serving model has %v", f.name, f.y, f.x)
		}
	}
	return nil
}
