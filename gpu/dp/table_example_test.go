package dp_test

import (
	"os"

	"tau2rl/gpu"
	"tau2rl/gpu/dp"
)

// The table docs/MULTIGPU.md quotes: the 1.7B shape on 1, 2 and 8 GPUs and the 8B shape on 1 and
// 8, with the CUDA backend's buffers.
func ExampleWriteMemoryTable() {
	dp.WriteMemoryTable(os.Stdout, "Qwen3-1.7B", gpu.Qwen3_1_7B(), "cuda", []int{1, 2, 8})
	dp.WriteMemoryTable(os.Stdout, "Qwen3-8B", gpu.Qwen3_8B(), "cuda", []int{1, 8})
}
