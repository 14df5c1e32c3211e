package dp

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"tau2rl/gpu"
	"tau2rl/gpu/safetensors"
)

// The sharded optimizer state: one file per rank, written by the process driving that rank, so no
// host gathers the 12 bytes per parameter of the whole model:
//
//	optimizer-rank-<r>-of-<N>.safetensors   (r, N zero-padded to 5 digits)
//	    master, exp_avg, exp_avg_sq          F32 [shard_len]: the rank's block of the flat
//	                                         buffers (gpu.FlatLayout), padding included
//	    __metadata__ format=tau2rl.adamw.sharded format_version=1 optimizer=adamw step rank world
//	                 shard_lo shard_len layout_kind layout_len layout_hash
//
// Flat element e means the same parameter element at every world size (the layout only pads at the
// end), so a checkpoint written by N ranks is read back by M ranks by re-slicing: resume on a
// different GPU count is exact. A checkpoint of the unsharded backend (gpu.OptimizerStateFile,
// tensors by name) is read too, so a one-GPU run can continue on several. The reverse, a sharded
// checkpoint into a plain backend, is refused by that backend (no gpu.OptimizerStateFile) with an
// error naming the shard files; resume it with a Group of any size, world 1 included.
const (
	ShardFormat        = "tau2rl.adamw.sharded"
	ShardFormatVersion = "1"
)

var shardName = regexp.MustCompile(`^optimizer-rank-(\d{5})-of-(\d{5})\.safetensors$`)

// ShardFile is the name of rank's optimizer-state file in a world of the given size.
func ShardFile(rank, world int) string {
	return fmt.Sprintf("optimizer-rank-%05d-of-%05d.safetensors", rank, world)
}

// layoutHash fingerprints the layout and the model's tensor shapes, so shards are never re-sliced
// into a different layout or model.
func (g *Group) layoutHash() string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", g.layout.Kind, g.layout.Len)
	for i, s := range gpu.ParamSpecs(g.cfg) {
		fmt.Fprintf(h, ";%s%v@%d", s.Name, s.Shape, g.layout.Offsets[i])
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

var shardTensors = [3]string{"master", "exp_avg", "exp_avg_sq"}

// SaveOptimizerState writes the local ranks' optimizer-state files into dir (created if needed),
// each atomically (temporary file, fsync, rename). Every host must write into the same dir (a
// shared file system) for a checkpoint to be complete.
func (g *Group) SaveOptimizerState(dir string) error {
	if err := g.usable(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dp: save optimizer state: %w", err)
	}
	hash := g.layoutHash()
	err := g.each(func(_ int, r *rank) error {
		st, err := r.sh.ShardState()
		if err != nil {
			return err
		}
		s := r.shard
		md := map[string]string{
			"format": ShardFormat, "format_version": ShardFormatVersion, "optimizer": "adamw",
			"step": strconv.Itoa(st.Step), "rank": strconv.Itoa(s.Rank), "world": strconv.Itoa(s.World),
			"shard_lo": strconv.Itoa(s.Lo), "shard_len": strconv.Itoa(s.Len),
			"layout_kind": g.layout.Kind, "layout_len": strconv.Itoa(g.layout.Len), "layout_hash": hash,
		}
		var specs []safetensors.TensorSpec
		for _, n := range shardTensors {
			specs = append(specs, safetensors.TensorSpec{Name: n, DType: safetensors.F32, Shape: []int{s.Len}})
		}
		path := filepath.Join(dir, ShardFile(s.Rank, s.World))
		err = gpu.WriteFileAtomic(path, func(w io.Writer) error {
			sw, err := safetensors.NewWriter(w, specs, md)
			if err != nil {
				return err
			}
			for i, vals := range [][]float32{st.Master, st.ExpAvg, st.ExpAvgSq} {
				if err := sw.WriteFloat32(shardTensors[i], vals); err != nil {
					return err
				}
			}
			return sw.Close()
		})
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dp: save optimizer state: %w", err)
	}
	return nil
}

// shardSet is the opened shard files of one checkpoint.
type shardSet struct {
	files     []*safetensors.File // by rank
	world     int
	shardLen  int
	step      int
	layoutLen int
}

func (s *shardSet) close() {
	for _, f := range s.files {
		if f != nil {
			f.Close()
		}
	}
}

func mdInt(md map[string]string, key string) (int, error) {
	v, err := strconv.Atoi(md[key])
	if err != nil || v < 0 || strconv.Itoa(v) != md[key] {
		return 0, fmt.Errorf("metadata %s %q is not a non-negative integer", key, md[key])
	}
	return v, nil
}

// openShards opens and cross-checks every optimizer-rank file of dir; (nil, nil) when there are none.
func (g *Group) openShards(dir string) (*shardSet, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if shardName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	set := &shardSet{}
	ok := false
	defer func() {
		if !ok {
			set.close()
		}
	}()
	hash := g.layoutHash()
	for _, name := range names {
		m := shardName.FindStringSubmatch(name)
		rk, _ := strconv.Atoi(m[1])
		w, _ := strconv.Atoi(m[2])
		if set.files == nil {
			if w < 1 {
				return nil, fmt.Errorf("%s: world size 0", name)
			}
			set.world, set.files = w, make([]*safetensors.File, w)
		}
		if w != set.world || rk >= w {
			return nil, fmt.Errorf("%s does not belong to a world of %d ranks (mixed shard sets in one checkpoint)", name, set.world)
		}
		f, err := safetensors.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		set.files[rk] = f
		md := f.Header.Metadata
		switch {
		case md["format"] != ShardFormat || md["format_version"] != ShardFormatVersion || md["optimizer"] != "adamw":
			return nil, fmt.Errorf("%s: format %q version %q optimizer %q, want %s %s adamw", name, md["format"], md["format_version"], md["optimizer"], ShardFormat, ShardFormatVersion)
		case md["layout_kind"] != g.layout.Kind:
			return nil, fmt.Errorf("%s was written with the %q flat layout, this backend uses %q: resume on the same backend kind", name, md["layout_kind"], g.layout.Kind)
		case md["layout_hash"] != hash:
			return nil, fmt.Errorf("%s was written for a different model or layout (layout hash %s, want %s)", name, md["layout_hash"], hash)
		}
		vals := map[string]int{}
		for _, k := range []string{"step", "rank", "world", "shard_lo", "shard_len", "layout_len"} {
			if vals[k], err = mdInt(md, k); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		if set.shardLen == 0 {
			set.shardLen, set.step = vals["shard_len"], vals["step"]
		}
		switch {
		case vals["rank"] != rk || vals["world"] != w:
			return nil, fmt.Errorf("%s: metadata says rank %d of %d", name, vals["rank"], vals["world"])
		case vals["step"] != set.step:
			return nil, fmt.Errorf("%s: step %d, other shards %d (shards of different checkpoints)", name, vals["step"], set.step)
		case vals["shard_len"] != set.shardLen || vals["shard_lo"] != rk*set.shardLen || set.shardLen*w < g.layout.Len:
			return nil, fmt.Errorf("%s: shard [%d,+%d) does not tile a %d-element layout over %d ranks", name, vals["shard_lo"], vals["shard_len"], g.layout.Len, w)
		case vals["layout_len"] != g.layout.Len:
			return nil, fmt.Errorf("%s: layout length %d, want %d", name, vals["layout_len"], g.layout.Len)
		}
		for _, t := range shardTensors {
			info, ok := f.Header.Lookup(t)
			if !ok || info.DType != safetensors.F32 || !slices.Equal(info.Shape, []int{set.shardLen}) {
				return nil, fmt.Errorf("%s: tensor %q missing or not F32 [%d]", name, t, set.shardLen)
			}
		}
		if len(f.Header.Tensors) != len(shardTensors) {
			return nil, fmt.Errorf("%s: %d tensors, want %d", name, len(f.Header.Tensors), len(shardTensors))
		}
	}
	for r, f := range set.files {
		if f == nil {
			return nil, fmt.Errorf("shard %s is missing: the checkpoint is incomplete", ShardFile(r, set.world))
		}
	}
	set.layoutLen = g.layout.Len
	ok = true
	return set, nil
}

// checkState checks a rank's decoded state as gpu.OptimizerStateSaver requires of any file.
func checkState(st gpu.ShardState) error {
	for k, vals := range [][]float32{st.Master, st.ExpAvg, st.ExpAvgSq} {
		for i, x := range vals {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("%s[%d] = %v is not finite", shardTensors[k], i, x)
			}
			if k == 2 && x < 0 {
				return fmt.Errorf("exp_avg_sq[%d] = %v: a second moment cannot be negative", i, x)
			}
			if st.Step == 0 && k > 0 && x != 0 {
				return fmt.Errorf("%s[%d] = %v at step 0: moments must be zero before the first step", shardTensors[k], i, x)
			}
		}
	}
	return nil
}

// LoadOptimizerState reads dir's optimizer state into the local ranks: the shard files of any
// world size (re-sliced to this one), or else an unsharded gpu.OptimizerStateFile. Everything is
// read and checked before any rank changes; then the working weights are all-gathered from the
// restored masters (a collective: every host loads together).
func (g *Group) LoadOptimizerState(dir string) error {
	if err := g.usable(); err != nil {
		return err
	}
	states, err := g.readStates(dir)
	if err != nil {
		return fmt.Errorf("dp: load optimizer state %s: %w", dir, err)
	}
	err = g.each(func(i int, r *rank) error { return r.sh.SetShardState(states[i]) })
	if err != nil {
		return fmt.Errorf("dp: load optimizer state: %w", err)
	}
	if g.params {
		return g.each(func(_ int, r *rank) error { return r.be.(gpu.ParamSharder).ReleaseParams() })
	}
	return g.collective("parameter all-gather after load", func(_ int, r *rank) error {
		own, full := r.sh.ParamShard()
		return r.comm.AllGather(own, full)
	})
}

// readStates builds every local rank's state from dir.
func (g *Group) readStates(dir string) ([]gpu.ShardState, error) {
	set, err := g.openShards(dir)
	if err != nil {
		return nil, err
	}
	if set == nil {
		if _, err := os.Stat(filepath.Join(dir, gpu.OptimizerStateFile)); err != nil {
			return nil, fmt.Errorf("neither optimizer-rank-*-of-*.safetensors nor %s: %w", gpu.OptimizerStateFile, err)
		}
		return g.readConsolidated(filepath.Join(dir, gpu.OptimizerStateFile))
	}
	defer set.close()
	// Decode each old shard once, then cut every local rank's range out of them.
	old := make([][3][]float32, set.world)
	need := make([]bool, set.world)
	for _, r := range g.ranks {
		lo, hi := r.shard.Lo, min(r.shard.Lo+r.shard.Len, g.layout.Len)
		for k := lo / set.shardLen; k*set.shardLen < hi; k++ {
			need[k] = true
		}
	}
	for k, f := range set.files {
		if !need[k] {
			continue
		}
		for t, name := range shardTensors {
			if old[k][t], _, err = f.Float32(name); err != nil {
				return nil, fmt.Errorf("%s: %w", ShardFile(k, set.world), err)
			}
		}
	}
	out := make([]gpu.ShardState, len(g.ranks))
	for i, r := range g.ranks {
		st := gpu.ShardState{Step: set.step}
		dst := [3]*[]float32{&st.Master, &st.ExpAvg, &st.ExpAvgSq}
		for t := range shardTensors {
			*dst[t] = make([]float32, r.shard.Len)
		}
		for e := r.shard.Lo; e < min(r.shard.Lo+r.shard.Len, g.layout.Len); {
			k := e / set.shardLen
			end := min((k+1)*set.shardLen, r.shard.Lo+r.shard.Len, g.layout.Len)
			for t := range shardTensors {
				copy((*dst[t])[e-r.shard.Lo:end-r.shard.Lo], old[k][t][e-k*set.shardLen:end-k*set.shardLen])
			}
			e = end
		}
		if err := checkState(st); err != nil {
			return nil, fmt.Errorf("rank %d: %w", r.shard.Rank, err)
		}
		out[i] = st
	}
	return out, nil
}

// readConsolidated builds the local ranks' states from an unsharded optimizer-state file.
func (g *Group) readConsolidated(path string) ([]gpu.ShardState, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	step, err := gpu.CheckOptimizerStateHeader(g.cfg, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]gpu.ShardState, len(g.ranks))
	for i, r := range g.ranks {
		n := r.shard.Len
		out[i] = gpu.ShardState{Master: make([]float32, n), ExpAvg: make([]float32, n), ExpAvgSq: make([]float32, n), Step: step}
	}
	suffix := map[string]int{gpu.SuffixMaster: 0, gpu.SuffixExpAvg: 1, gpu.SuffixExpAvgSq: 2}
	for pi, p := range gpu.ParamSpecs(g.cfg) {
		off := g.layout.Offsets[pi]
		for _, suf := range gpu.OptimizerStateSuffixes {
			vals, err := gpu.ReadOptimizerStateTensor(f, p, suf, step)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			for i, r := range g.ranks {
				lo, hi := max(off, r.shard.Lo), min(off+len(vals), r.shard.Lo+r.shard.Len)
				if lo >= hi {
					continue
				}
				st := &out[i]
				dst := [3][]float32{st.Master, st.ExpAvg, st.ExpAvgSq}[suffix[suf]]
				copy(dst[lo-r.shard.Lo:hi-r.shard.Lo], vals[lo-off:hi-off])
			}
		}
	}
	return out, nil
}

// HasShards reports whether dir holds a complete set of optimizer-rank files (every rank of one
// world size), so a checkpoint writer can check that the state it announces is there; an
// incomplete or mixed set is an error naming what is wrong.
func HasShards(dir string) (bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	world, ranks := -1, map[int]bool{}
	for _, e := range ents {
		m := shardName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		r, _ := strconv.Atoi(m[1])
		w, _ := strconv.Atoi(m[2])
		if world >= 0 && w != world {
			return false, fmt.Errorf("dp: %s: optimizer shards of world sizes %d and %d", dir, world, w)
		}
		world = w
		ranks[r] = true
	}
	if world < 0 {
		return false, nil
	}
	for r := range world {
		if !ranks[r] {
			return false, fmt.Errorf("dp: %s: optimizer shard %s is missing", dir, ShardFile(r, world))
		}
	}
	return true, nil
}
