package backends

import (
	"context"
	"fmt"
	"net"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/cpu"
)

// The pure-Go reference backend, in every binary: small models, tests, smoke runs.
func init() {
	Register("cpu", Backend{
		Load: func(dir string, _ Options) (gpu.Backend, error) { return backend(cpu.Load(dir)) },
		Random: func(mc gpu.Config, seed uint64, _ Options) (gpu.Backend, error) {
			return backend(cpu.NewRandom(mc, seed))
		},
		// Ranks on one host are goroutines; the collectives run in memory.
		LocalComms: func(w World) ([]collective.Comm, error) { return collective.NewLocal(w.Ranks) },
		// Several hosts: a TCP hub in the leader's process (small models, tests).
		CommID:    serveHub,
		HostComms: hubComms,
		// The cache is sized in tokens (kv.cpu_tokens): host memory is not the constraint
		// memory_fraction describes.
		Decoder: func(w *gpu.Weights, kv KV) (gpu.Decoder, error) {
			n := kv.Blocks
			if n == 0 {
				n = (kv.CPUTokens + kv.BlockSize - 1) / kv.BlockSize
			}
			return decoder(cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: kv.BlockSize, NumBlocks: n}))
		},
	})
}

// serveHub starts the TCP hub of a cpu world spanning several hosts in the leader's process and
// returns its address as the followers reach it (the feed address's host, the hub's own port).
// The hub ends when the ranks leave.
func serveHub(w World) ([]byte, error) {
	host, _, err := net.SplitHostPort(w.Addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("collective hub: %w", err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	go func() {
		// The ranks connect once the followers are welcomed and have built their backends.
		ctx, cancel := context.WithTimeout(context.Background(), 2*w.Timeout)
		defer cancel()
		collective.ServeHub(ctx, ln, w.Job, w.Size)
	}()
	return []byte(net.JoinHostPort(host, port)), nil
}

// hubComms joins this host's cpu ranks to the leader's TCP hub, whose address is the id.
func hubComms(w World, id []byte) ([]collective.Comm, error) {
	ctx, cancel := context.WithTimeout(context.Background(), w.Timeout)
	defer cancel()
	comms := make([]collective.Comm, 0, w.Ranks)
	for r := range w.Ranks {
		cm, err := collective.DialHub(ctx, string(id), w.Job, w.FirstRank+r, w.Size, 100*time.Millisecond)
		if err != nil {
			for _, x := range comms {
				x.Close()
			}
			return nil, err
		}
		comms = append(comms, cm)
	}
	return comms, nil
}
