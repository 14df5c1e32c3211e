package gpu

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadHubConfig(t *testing.T) {
	c, err := LoadConfig("testdata/qwen3-0.6b-config.json")
	if err != nil {
		t.Fatal(err)
	}
	want := Qwen3_0_6B()
	if c.VocabSize != want.VocabSize || c.HiddenSize != want.HiddenSize || c.IntermediateSize != want.IntermediateSize ||
		c.NumHiddenLayers != want.NumHiddenLayers || c.NumAttentionHeads != want.NumAttentionHeads ||
		c.NumKeyValueHeads != want.NumKeyValueHeads || c.HeadDim != want.HeadDim || c.RMSNormEps != 1e-6 ||
		c.RopeTheta != 1e6 || !c.TieWordEmbeddings || c.MaxPositionEmbeddings != 40960 ||
		c.BOSTokenID != 151643 || c.EOSTokenID != 151645 || c.TorchDtype != "bfloat16" {
		t.Fatalf("loaded %+v", c)
	}
	if c.QDim() != 2048 || c.KVDim() != 1024 {
		t.Fatalf("QDim %d KVDim %d", c.QDim(), c.KVDim())
	}
	// 0.596B parameters (anchors.md B.2).
	if n := c.NumParams(); n < 595_000_000 || n > 597_000_000 {
		t.Fatalf("NumParams = %d", n)
	}
	if n := Qwen3_1_7B().NumParams(); n < 1_720_000_000 || n > 1_722_000_000 {
		t.Fatalf("1.7B NumParams = %d", n)
	}
}

func TestConfigRoundTripKeepsUnknownKeys(t *testing.T) {
	b, _ := os.ReadFile("testdata/qwen3-0.6b-config.json")
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var orig, got map[string]any
	json.Unmarshal(b, &orig)
	json.Unmarshal(out, &got)
	for k, v := range orig {
		gb, _ := json.Marshal(got[k])
		ob, _ := json.Marshal(v)
		if string(gb) != string(ob) {
			t.Errorf("key %s: wrote %s, hub has %s", k, gb, ob)
		}
	}
	for k := range got {
		if _, ok := orig[k]; !ok {
			t.Errorf("wrote extra key %s", k)
		}
	}
}

func TestLoadNewerTransformersConfig(t *testing.T) {
	c, err := LoadConfig("testdata/qwen3-v5-config.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 1e6 || c.TorchDtype != "bfloat16" || c.EOSTokenID != 151645 || c.RMSNormEps != 1e-6 {
		t.Fatalf("loaded %+v", c)
	}
	out, _ := json.Marshal(c)
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"rope_theta": "1000000", "torch_dtype": `"bfloat16"`,
		"eos_token_id": "[151645,151643]", "bos_token_id": "null", "rope_scaling": "null"} {
		if got, _ := json.Marshal(m[k]); string(got) != want {
			t.Errorf("written %s = %s, want %s", k, got, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"ok", func(*Config) {}, ""},
		{"zero heads", func(c *Config) { c.NumAttentionHeads = 0 }, "num_attention_heads"},
		{"gqa", func(c *Config) { c.NumKeyValueHeads = 3 }, "multiple"},
		{"odd head_dim", func(c *Config) { c.HeadDim = 15 }, "even"},
		{"gelu", func(c *Config) { c.HiddenAct = "gelu" }, "silu"},
		{"eps", func(c *Config) { c.RMSNormEps = 0 }, "rms_norm_eps"},
		{"bias", func(c *Config) { c.AttentionBias = true }, "attention_bias"},
		{"sliding", func(c *Config) { c.UseSlidingWindow = true }, "sliding"},
		{"yarn", func(c *Config) {
			c.Extra = map[string]json.RawMessage{"rope_scaling": json.RawMessage(`{"rope_type":"yarn","factor":4}`)}
		}, "rope_scaling"},
		{"default rope", func(c *Config) {
			c.Extra = map[string]json.RawMessage{"rope_scaling": json.RawMessage(`{"rope_type":"default"}`)}
		}, ""},
		{"sliding layer", func(c *Config) {
			c.Extra = map[string]json.RawMessage{"layer_types": json.RawMessage(`["full_attention","sliding_attention"]`)}
		}, "layer_types"},
		{"full layers", func(c *Config) {
			c.Extra = map[string]json.RawMessage{"layer_types": json.RawMessage(`["full_attention","full_attention"]`)}
		}, ""},
		{"model type", func(c *Config) { c.ModelType = "llama" }, "model_type"},
		{"dtype", func(c *Config) { c.TorchDtype = "int8" }, "dtype"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := TinyConfig()
			tc.mutate(&c)
			err := c.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadConfig(dir); err == nil {
		t.Error("directory without config.json accepted")
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"vocab_size": "many"}`), 0o644)
	if _, err := LoadConfig(dir); err == nil {
		t.Error("string vocab_size accepted")
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"vocab_size": 10}`), 0o644)
	if _, err := LoadConfig(dir); err == nil {
		t.Error("config without hidden_size accepted")
	}
}

func FuzzConfigJSON(f *testing.F) {
	b, _ := os.ReadFile("testdata/qwen3-0.6b-config.json")
	f.Add(b)
	b, _ = os.ReadFile("testdata/qwen3-v5-config.json")
	f.Add(b)
	f.Add([]byte(`{"eos_token_id": []}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Config
		if json.Unmarshal(b, &c) != nil || c.Validate() != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("valid config does not marshal: %v", err)
		}
		var c2 Config
		if err := json.Unmarshal(out, &c2); err != nil {
			t.Fatalf("written config does not parse: %v\n%s", err, out)
		}
		if c2.HiddenSize != c.HiddenSize || c2.RopeTheta != c.RopeTheta || c2.EOSTokenID != c.EOSTokenID ||
			c2.TieWordEmbeddings != c.TieWordEmbeddings || c2.HeadDim != c.HeadDim {
			t.Fatalf("round trip changed config: %+v → %+v", c, c2)
		}
	})
}
