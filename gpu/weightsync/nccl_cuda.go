//go:build cuda

package weightsync

import (
	"context"
	"fmt"
	"net"

	"tau2rl/gpu/collective"
	"tau2rl/gpu/collective/nccl"
)

// The NCCL side (build tag cuda): rank 0 makes the unique id and serves it over the rendezvous
// port with collective.ServeID, each server fetches it as host rank_offset (collective.FetchID),
// and every rank then joins with ncclCommInitRank on its device. Compiled against stand-in
// libraries here; not yet run on several GPUs.

func init() { ncclSide = ncclImpl{} }

type ncclImpl struct{}

func (ncclImpl) join(ctx context.Context, addr, job string, rank, world, device int) (collective.Comm, error) {
	id, err := collective.FetchID(ctx, addr, job, rank, retry)
	if err != nil {
		return nil, fmt.Errorf("weightsync: nccl id: %w", err)
	}
	return initRank(ctx, id, rank, world, device)
}

func (ncclImpl) host(ctx context.Context, ln net.Listener, job string, world, device int) (collective.Comm, error) {
	id, err := nccl.UniqueID()
	if err != nil {
		ln.Close()
		return nil, err
	}
	// Every server has fetched the id when ServeID returns, so the init below waits only for
	// ranks that are already joining.
	if err := collective.ServeID(ctx, ln, job, world, id); err != nil {
		return nil, fmt.Errorf("weightsync: serve the nccl id: %w", err)
	}
	return initRank(ctx, id, 0, world, device)
}

// initRank runs ncclCommInitRank, which cannot be interrupted: when ctx ends first the error is
// returned and the communicator, if it ever forms, is closed.
func initRank(ctx context.Context, id []byte, rank, world, device int) (collective.Comm, error) {
	type result struct {
		c   *nccl.Comm
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := nccl.New(id, rank, world, device)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, fmt.Errorf("weightsync: nccl init of rank %d of %d on device %d: %w", rank, world, device, context.Cause(ctx))
	}
}
