//go:build cuda

package backends

import (
	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/collective/nccl"
	"tau2rl/gpu/cuda"
)

// The CUDA backend exists only in binaries built with -tags cuda (make gpu-trainer, make
// gpu-sampler): it links the kernels.
func init() {
	Register("cuda", Backend{
		Load: func(dir string, o Options) (gpu.Backend, error) { return backend(cuda.Load(dir, o.CUDA)) },
		Random: func(mc gpu.Config, seed uint64, o Options) (gpu.Backend, error) {
			return backend(cuda.NewRandom(mc, seed, o.CUDA))
		},
		// A data-parallel rank is built as its shard: the whole fp32 optimizer state of 8B
		// (137 GiB) fits no single GPU.
		Shard: func(w *gpu.Weights, o Options, rank, world int) (gpu.Backend, error) {
			return backend(cuda.NewShard(w, o.CUDA, rank, world))
		},
		// One process drives its host's GPUs: one NCCL communicator per device, made here.
		LocalComms: func(w World) ([]collective.Comm, error) {
			id, err := nccl.UniqueID()
			if err != nil {
				return nil, err
			}
			return nccl.NewHost(id, 0, len(w.Devices), w.Devices)
		},
		// Several hosts (untested: no multi-host machine yet): host 0 makes the id and sends it
		// in the step feed's welcome; every host joins its devices as its block of global ranks.
		CommID: func(World) ([]byte, error) { return nccl.UniqueID() },
		HostComms: func(w World, id []byte) ([]collective.Comm, error) {
			return nccl.NewHost(id, w.FirstRank, w.Size, w.Devices)
		},
		// Without kv.blocks the cache takes kv.memory_fraction of the memory left after the
		// weights.
		Decoder: func(w *gpu.Weights, kv KV) (gpu.Decoder, error) {
			n := kv.Blocks
			if n == 0 {
				var err error
				if n, err = cuda.KVBlocksForMemory(w.Config, kv.BlockSize, kv.MemoryFraction); err != nil {
					return nil, err
				}
			}
			return decoder(cuda.NewDecoder(w, gpu.KVCacheSpec{BlockSize: kv.BlockSize, NumBlocks: n}))
		},
	})
}
