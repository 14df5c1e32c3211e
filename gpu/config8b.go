package gpu

// Qwen3_8B returns the Qwen/Qwen3-8B geometry (hub config.json; AReaL's 8B τ² model), the shape
// the data-parallel trainer (gpu/dp) shards over 8 GPUs.
func Qwen3_8B() Config {
	c := Qwen3_0_6B()
	c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 4096, 12288, 36
	c.NumAttentionHeads, c.NumKeyValueHeads = 32, 8
	c.TieWordEmbeddings = false
	return c
}
