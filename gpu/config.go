package gpu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// Config mirrors a Hugging Face Qwen3 config.json (Qwen3ForCausalLM). The JSON names are
// transformers' own, so LoadConfig reads a hub config.json unchanged and MarshalJSON writes one that
// transformers, SGLang and vLLM load. Fields this package does not interpret are kept in Extra and
// written back, so a load→save round trip loses nothing.
type Config struct {
	Architectures         []string `json:"architectures"`
	ModelType             string   `json:"model_type"`
	VocabSize             int      `json:"vocab_size"`
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"`
	HeadDim               int      `json:"head_dim"`
	HiddenAct             string   `json:"hidden_act"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	RopeTheta             float64  `json:"rope_theta"`
	TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	AttentionBias         bool     `json:"attention_bias"`
	AttentionDropout      float64  `json:"attention_dropout"`
	UseSlidingWindow      bool     `json:"use_sliding_window"`
	InitializerRange      float64  `json:"initializer_range"`
	TorchDtype            string   `json:"torch_dtype"`
	BOSTokenID            int      `json:"bos_token_id"`
	EOSTokenID            int      `json:"eos_token_id"`

	// Extra holds every other config.json key verbatim (rope_scaling, sliding_window,
	// transformers_version, …) so saving writes them back.
	Extra map[string]json.RawMessage `json:"-"`
}

// Qwen3_0_6B returns the Qwen/Qwen3-0.6B geometry (hub config.json), the smallest real shape.
func Qwen3_0_6B() Config {
	return Config{
		Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
		VocabSize: 151936, HiddenSize: 1024, IntermediateSize: 3072, NumHiddenLayers: 28,
		NumAttentionHeads: 16, NumKeyValueHeads: 8, HeadDim: 128, HiddenAct: "silu",
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, MaxPositionEmbeddings: 40960,
		InitializerRange: 0.02, TorchDtype: string(BF16), BOSTokenID: 151643, EOSTokenID: 151645,
	}
}

// Qwen3_1_7B returns the Qwen/Qwen3-1.7B geometry (AReaL's τ² training model).
func Qwen3_1_7B() Config {
	c := Qwen3_0_6B()
	c.HiddenSize, c.IntermediateSize = 2048, 6144
	return c
}

// TinyConfig returns a small Qwen3 shape for tests and `make run`: every feature of the real
// architecture (GQA with 2 query heads per KV head, head_dim ≠ hidden/heads, q/k norms, tied
// embeddings) at a size the pure-Go backend runs in milliseconds.
func TinyConfig() Config {
	return Config{
		Architectures: []string{"Qwen3ForCausalLM"}, ModelType: "qwen3",
		VocabSize: 64, HiddenSize: 32, IntermediateSize: 48, NumHiddenLayers: 2,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 16, HiddenAct: "silu",
		RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true, MaxPositionEmbeddings: 512,
		InitializerRange: 0.02, TorchDtype: string(F32), BOSTokenID: 1, EOSTokenID: 2,
	}
}

// QDim is the width of the query projection, num_attention_heads·head_dim (≠ hidden_size in 0.6B).
func (c Config) QDim() int { return c.NumAttentionHeads * c.HeadDim }

// KVDim is the width of the key and value projections, num_key_value_heads·head_dim.
func (c Config) KVDim() int { return c.NumKeyValueHeads * c.HeadDim }

// Validate rejects configurations the backends do not compute exactly as transformers would
// (biases, sliding windows, RoPE scaling, other activations) and inconsistent shapes.
func (c Config) Validate() error {
	pos := []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads}, {"head_dim", c.HeadDim},
	}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("gpu: config %s = %d, must be > 0", p.name, p.v)
		}
	}
	if c.ModelType != "" && c.ModelType != "qwen3" {
		return fmt.Errorf("gpu: config model_type %q, want qwen3", c.ModelType)
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("gpu: config num_attention_heads %d not a multiple of num_key_value_heads %d",
			c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("gpu: config head_dim %d must be even for rotate-half RoPE", c.HeadDim)
	}
	if c.HiddenAct != "" && c.HiddenAct != "silu" {
		return fmt.Errorf("gpu: config hidden_act %q, only silu is supported", c.HiddenAct)
	}
	if !(c.RMSNormEps > 0) {
		return fmt.Errorf("gpu: config rms_norm_eps %v must be > 0", c.RMSNormEps)
	}
	if !(c.RopeTheta > 0) {
		return fmt.Errorf("gpu: config rope_theta %v must be > 0", c.RopeTheta)
	}
	if c.AttentionBias {
		return fmt.Errorf("gpu: config attention_bias true is not supported (Qwen3 has no biases)")
	}
	if c.UseSlidingWindow {
		return fmt.Errorf("gpu: config use_sliding_window true is not supported")
	}
	if raw, ok := c.Extra["rope_scaling"]; ok && !isNullOrDefaultRope(raw) {
		return fmt.Errorf("gpu: config rope_scaling %s is not supported (only null/default)", raw)
	}
	if raw, ok := c.Extra["layer_types"]; ok {
		var types []string
		if err := json.Unmarshal(raw, &types); err != nil {
			return fmt.Errorf("gpu: config layer_types: %w", err)
		}
		for i, t := range types {
			if t != "full_attention" {
				return fmt.Errorf("gpu: config layer_types[%d] = %q, only full_attention is supported", i, t)
			}
		}
	}
	if c.TorchDtype != "" {
		if _, err := ParseDType(c.TorchDtype); err != nil {
			return fmt.Errorf("gpu: config torch_dtype: %w", err)
		}
	}
	return nil
}

func isNullOrDefaultRope(raw json.RawMessage) bool {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return true
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return false
	}
	for k, v := range m {
		switch k {
		case "rope_type", "type":
			if v != "default" {
				return false
			}
		case "rope_theta":
		default:
			return false
		}
	}
	return true
}

// configKnown lists the keys Config holds in typed fields; everything else goes to Extra.
var configKnown = map[string]bool{
	"architectures": true, "model_type": true, "vocab_size": true, "hidden_size": true,
	"intermediate_size": true, "num_hidden_layers": true, "num_attention_heads": true,
	"num_key_value_heads": true, "head_dim": true, "hidden_act": true, "rms_norm_eps": true,
	"rope_theta": true, "tie_word_embeddings": true, "max_position_embeddings": true,
	"attention_bias": true, "attention_dropout": true, "use_sliding_window": true,
	"initializer_range": true, "torch_dtype": true, "bos_token_id": true, "eos_token_id": true,
}

// UnmarshalJSON reads a Hugging Face config.json. It accepts the variants transformers writes:
// "dtype" for torch_dtype (≥ 4.56), rope_theta inside "rope_parameters" (≥ 5.0), eos_token_id as a
// list (the first id is kept), and a missing head_dim (hidden_size / num_attention_heads).
// Missing keys take transformers' Qwen3Config defaults.
func (c *Config) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("gpu: config.json: %w", err)
	}
	type plain Config
	p := plain{
		HiddenAct: "silu", RMSNormEps: 1e-6, RopeTheta: 10000, MaxPositionEmbeddings: 32768,
		InitializerRange: 0.02, TieWordEmbeddings: false,
	}
	known := map[string]json.RawMessage{}
	extra := map[string]json.RawMessage{}
	for k, v := range raw {
		if configKnown[k] && k != "eos_token_id" && k != "bos_token_id" {
			known[k] = v
		} else if k != "eos_token_id" && k != "bos_token_id" {
			extra[k] = v
		}
	}
	kb, err := json.Marshal(known)
	if err != nil {
		return fmt.Errorf("gpu: config.json: %w", err)
	}
	if err := json.Unmarshal(kb, &p); err != nil {
		return fmt.Errorf("gpu: config.json: %w", err)
	}
	for _, k := range []string{"bos_token_id", "eos_token_id"} {
		v, ok := raw[k]
		if !ok {
			continue
		}
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			extra[k] = v // written back as null, not as token 0
			continue
		}
		id, err := firstTokenID(v)
		if err != nil {
			return fmt.Errorf("gpu: config.json %s: %w", k, err)
		}
		if k == "bos_token_id" {
			p.BOSTokenID = id
		} else {
			p.EOSTokenID = id
			if bytes.HasPrefix(bytes.TrimSpace(v), []byte("[")) {
				extra[k] = v // keep the full list for writing back
			}
		}
	}
	if _, ok := raw["torch_dtype"]; !ok {
		if v, ok := raw["dtype"]; ok {
			var s string
			if json.Unmarshal(v, &s) == nil {
				p.TorchDtype = s
			}
		}
	}
	if _, ok := raw["rope_theta"]; !ok {
		if v, ok := raw["rope_parameters"]; ok {
			var rp struct {
				RopeTheta *float64 `json:"rope_theta"`
			}
			if err := json.Unmarshal(v, &rp); err != nil {
				return fmt.Errorf("gpu: config.json rope_parameters: %w", err)
			}
			if rp.RopeTheta != nil {
				p.RopeTheta = *rp.RopeTheta
			}
			if !isNullOrDefaultRope(v) {
				extra["rope_scaling"] = v // so Validate rejects it
			}
		}
	}
	if _, ok := raw["head_dim"]; !ok && p.NumAttentionHeads > 0 {
		p.HeadDim = p.HiddenSize / p.NumAttentionHeads
	}
	if _, ok := raw["num_key_value_heads"]; !ok {
		p.NumKeyValueHeads = p.NumAttentionHeads
	}
	*c = Config(p)
	if len(extra) > 0 {
		c.Extra = extra
	}
	return nil
}

func firstTokenID(v json.RawMessage) (int, error) {
	var id int
	if err := json.Unmarshal(v, &id); err == nil {
		return id, nil
	}
	var ids []int
	if err := json.Unmarshal(v, &ids); err != nil {
		return 0, fmt.Errorf("want an integer or a list of integers: %w", err)
	}
	if len(ids) == 0 {
		return 0, fmt.Errorf("empty list")
	}
	return ids[0], nil
}

// MarshalJSON writes a config.json for transformers/SGLang/vLLM: the typed fields, the Extra keys,
// and the keys those loaders expect that the typed fields do not carry (rope_scaling,
// sliding_window, max_window_layers, use_cache) when Extra lacks them. Keys are sorted, as
// transformers writes them.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config
	b, err := json.Marshal(plain(c))
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if len(c.Architectures) == 0 {
		m["architectures"] = json.RawMessage(`["Qwen3ForCausalLM"]`)
	}
	if c.ModelType == "" {
		m["model_type"] = json.RawMessage(`"qwen3"`)
	}
	defaults := map[string]string{
		"rope_scaling":      "null",
		"sliding_window":    "null",
		"max_window_layers": fmt.Sprint(c.NumHiddenLayers),
		"use_cache":         "true",
	}
	for k, v := range defaults {
		m[k] = json.RawMessage(v)
	}
	for k, v := range c.Extra {
		if k == "dtype" || k == "rope_parameters" {
			continue // superseded by torch_dtype / rope_theta, which we always write
		}
		m[k] = v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out bytes.Buffer
	out.WriteString("{\n")
	for i, k := range keys {
		kb, _ := json.Marshal(k)
		var vb bytes.Buffer
		if err := json.Compact(&vb, m[k]); err != nil {
			return nil, fmt.Errorf("gpu: config key %s: %w", k, err)
		}
		fmt.Fprintf(&out, "  %s: %s", kb, vb.Bytes())
		if i < len(keys)-1 {
			out.WriteString(",")
		}
		out.WriteString("\n")
	}
	out.WriteString("}")
	return out.Bytes(), nil
}

// LoadConfig reads and validates a Hugging Face config.json (a file, or a directory holding one).
func LoadConfig(path string) (Config, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = path + string(os.PathSeparator) + "config.json"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("gpu: load config: %w", err)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("gpu: load config %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("gpu: load config %s: %w", path, err)
	}
	return c, nil
}
