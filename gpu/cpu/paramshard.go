package cpu

import (
	"fmt"

	"tau2rl/gpu"
)

// Parameter sharding (gpu.ParamSharder): the model asks for a unit's weights before it reads
// them (need) and gives them back after (done). Without sharding both are no-ops. With it, need
// runs gpu/dp's gather (a collective that fills the unit from its owners) and done zeroes the
// unit outside this rank's shard, so a pass that skipped a gather would compute with zeros and
// the N-rank tests would see it. The pure-Go backend keeps its whole fp32 buffer allocated (it
// models the schedule, not the memory; the memory model is gpu/dp's).

var _ gpu.ParamSharder = (*Backend)(nil)

// paramHooks are the model's parameter-sharding callbacks.
type paramHooks struct {
	gather func(unit int) error
	units  [][2]int // flat element range of each unit
	lo, hi int      // this rank's shard
	err    error    // the first gather failure, reported after the pass
}

func (m *model[T]) need(unit int) {
	h := m.hooks
	if h == nil || h.err != nil {
		return
	}
	if err := h.gather(unit); err != nil {
		h.err = fmt.Errorf("gather of parameter unit %d: %w", unit, err)
	}
}

func (m *model[T]) done(unit int) {
	if h := m.hooks; h != nil {
		m.releaseRange(h.units[unit][0], h.units[unit][1])
	}
}

// releaseRange zeroes [a, b) of the parameters outside the shard.
func (m *model[T]) releaseRange(a, b int) {
	h := m.hooks
	if a < h.lo {
		clear(m.params[a:min(b, h.lo)])
	}
	if b > h.hi {
		clear(m.params[max(a, h.hi):b])
	}
}

// hookErr returns and clears the pass's gather failure.
func (m *model[T]) hookErr() error {
	if m.hooks == nil || m.hooks.err == nil {
		return nil
	}
	err := m.hooks.err
	m.hooks.err = nil
	return err
}

// ShardParams installs gather and releases every parameter outside the shard.
func (b *Backend) ShardParams(gather func(unit int) error) error {
	if err := b.sharded(); err != nil {
		return err
	}
	cfg := b.m.cfg
	l := b.FlatLayout()
	specs := gpu.ParamSpecs(cfg)
	h := &paramHooks{gather: gather, lo: b.shard.Lo, hi: b.shard.Lo + b.shard.Len}
	for _, u := range gpu.ParamUnits(cfg) {
		last := u[1] - 1
		h.units = append(h.units, [2]int{l.Offsets[u[0]], l.Offsets[last] + specs[last].Size()})
	}
	b.m.hooks = h
	return b.ReleaseParams()
}

// ReleaseParams zeroes every parameter outside the shard.
func (b *Backend) ReleaseParams() error {
	if err := b.sharded(); err != nil {
		return err
	}
	if b.m.hooks == nil {
		return fmt.Errorf("cpu: parameters are not sharded (call ShardParams first)")
	}
	b.m.releaseRange(0, len(b.m.params))
	return nil
}

// IdlePass issues the gathers of a forward and/or backward pass in the order forward and backward
// issue them, computing nothing.
func (b *Backend) IdlePass(forward, backward bool) error {
	if err := b.sharded(); err != nil {
		return err
	}
	m := b.m
	L := m.cfg.NumHiddenLayers
	if forward {
		m.need(0)
		m.done(0)
		for l := range L {
			m.need(l + 1)
			m.done(l + 1)
		}
		m.headNeed()
		m.headDone()
	}
	if backward {
		m.headNeed()
		m.headDone()
		for l := L - 1; l >= 0; l-- {
			m.need(l + 1)
			m.done(l + 1)
		}
	}
	return m.hookErr()
}

// headNeed gathers what the final norm and the LM head read: the last unit, and the embedding
// table when the head is tied to it.
func (m *model[T]) headNeed() {
	m.need(m.cfg.NumHiddenLayers + 1)
	if m.cfg.TieWordEmbeddings {
		m.need(0)
	}
}

func (m *model[T]) headDone() {
	if m.cfg.TieWordEmbeddings {
		m.done(0)
	}
	m.done(m.cfg.NumHiddenLayers + 1)
}
