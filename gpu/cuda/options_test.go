package cuda

import (
	"strings"
	"testing"
)

// TestOptionsValidate checks which options the backend refuses (no GPU needed: options.go has no
// build tag): vocab_tile must be 0 or a positive multiple of 8; attention one of the kernel names;
// gemm cublas or tuned.
func TestOptionsValidate(t *testing.T) {
	with := func(f func(*Options)) Options {
		o := DefaultOptions()
		f(&o)
		return o
	}
	for _, tc := range []struct {
		name string
		opt  Options
		want string // a substring of the error; "" for valid options
	}{
		{"defaults", DefaultOptions(), ""},
		{"empty attention", with(func(o *Options) { o.Attention = "" }), ""},
		{"vocab_tile 8", with(func(o *Options) { o.VocabTile = 8 }), ""},
		{"vocab_tile 16384", with(func(o *Options) { o.VocabTile = 16384 }), ""},
		{"vocab_tile wider than any vocabulary", with(func(o *Options) { o.VocabTile = 1 << 20 }), ""},
		{"vocab_tile -8", with(func(o *Options) { o.VocabTile = -8 }), "vocab_tile -8"},
		{"vocab_tile 1", with(func(o *Options) { o.VocabTile = 1 }), "multiple of 8"},
		{"vocab_tile 1004", with(func(o *Options) { o.VocabTile = 1004 }), "16-byte aligned"},
		{"device -1", with(func(o *Options) { o.Device = -1 }), "device -1"},
		{"logit_chunk 0", with(func(o *Options) { o.LogitChunk = 0 }), "logit_chunk 0"},
		{"attention hopper", with(func(o *Options) { o.Attention = AttentionHopper }), ""},
		{"attention auto", with(func(o *Options) { o.Attention = AttentionAuto }), ""},
		{"attention unknown", with(func(o *Options) { o.Attention = "fa3" }), `attention "fa3"`},
		{"gemm tuned", with(func(o *Options) { o.GEMM = GEMMTuned }), ""},
		{"empty gemm", with(func(o *Options) { o.GEMM = "" }), ""},
		{"gemm unknown", with(func(o *Options) { o.GEMM = "autotune" }), `gemm "autotune": want cublas or tuned`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opt.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate(%+v) = %v, want nil", tc.opt, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate(%+v) = %v, want an error containing %q", tc.opt, err, tc.want)
			}
		})
	}
}
