package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// GPU time accounted for (issue 29). While the GRPO stage runs, tau2-run scrapes the samplers'
// and the trainer's own timers (tau2rl_sampler_busy_seconds_total, tau2rl_trainer_busy_seconds_
// total), the producer's counters and, where nvidia-smi is on PATH, every GPU's utilisation and
// memory, and appends each reading to gputime.jsonl in the run directory (one TimelineSample a
// line). SummarizeTimeline turns the file into report.json's grpo.gpu_time; consumers/figures
// draws it as the timeline figure.

// TimelineFile is the timeline's name in the run directory.
const TimelineFile = "gputime.jsonl"

// Roles of a timeline sample.
const (
	RoleSampler  = "sampler"  // one per policy endpoint; Name is its address
	RoleTrainer  = "trainer"  // Name "trainer"
	RoleProducer = "producer" // the loop's counters (episodes, calls, generated tokens)
	RoleGPU      = "gpu"      // one per GPU nvidia-smi lists; Name is its index
)

// Counter names of TimelineSample.Counts.
const (
	CountEpisodes        = "episodes"         // producer: episodes finished
	CountCalls           = "calls"            // producer: policy (agent) calls; sampler: requests finished
	CountGeneratedTokens = "generated_tokens" // producer: completion tokens; sampler: tokens sampled
	CountPromptTokens    = "prompt_tokens"    // sampler: prompt tokens admitted
	CountSteps           = "steps"            // trainer: steps taken
	// producer: seconds summed over episodes (their wall time, grading included) and over
	// policy (agent) calls; by Little's law their growth per second of wall time is the mean
	// number of episodes, and of policy calls, in flight.
	CountEpisodeSeconds = "episode_seconds"
	CountAgentSeconds   = "agent_call_seconds"
)

// TrainerWaiting is the trainer's busy phase that leaves its GPU idle: blocked for a batch.
const TrainerWaiting = "waiting"

// TimelineSample is one reading of one source. Busy and Counts are cumulative (Prometheus
// counters since the process started): what happened between two readings is their difference.
type TimelineSample struct {
	// T is seconds since the stage started.
	T    float64 `json:"t"`
	Role string  `json:"role"`
	Name string  `json:"name"`
	// Busy is seconds per phase (sampler: decode, prefill, mixed, weight_update; trainer:
	// train, recompute, checkpoint, weight_sync, waiting).
	Busy   map[string]float64 `json:"busy_s,omitempty"`
	Counts map[string]float64 `json:"counts,omitempty"`
	// GPU readings (RoleGPU): utilisation in percent (nvidia-smi's utilization.gpu, the share of
	// the last sample period in which a kernel ran), memory in MiB, the card's name.
	Util        *float64 `json:"util_pct,omitempty"`
	MemUsedMiB  float64  `json:"mem_used_mib,omitempty"`
	MemTotalMiB float64  `json:"mem_total_mib,omitempty"`
	Card        string   `json:"card,omitempty"`
}

// ReadTimeline parses gputime.jsonl. A torn last line (the run was killed mid-write) is skipped;
// any other malformed line is an error naming its line number.
func ReadTimeline(r io.Reader) ([]TimelineSample, error) {
	var out []TimelineSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var bad error
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if bad != nil { // a malformed line that is not the last one
			return nil, bad
		}
		var s TimelineSample
		if err := json.Unmarshal(line, &s); err != nil {
			bad = fmt.Errorf("%s line %d: %w", TimelineFile, n, err)
			continue
		}
		if s.Role == "" || math.IsNaN(s.T) || math.IsInf(s.T, 0) {
			return nil, fmt.Errorf("%s line %d: a sample needs a role and a finite t", TimelineFile, n)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", TimelineFile, err)
	}
	return out, nil
}

// GPUTime is report.json's grpo.gpu_time: where each role's wall time went during the GRPO stage
// and what the loop turned out.
type GPUTime struct {
	// Timeline is gputime.jsonl's path.
	Timeline string `json:"timeline"`
	// WallSeconds is the span the timeline covers (first to last reading of any source).
	WallSeconds float64    `json:"wall_s"`
	Roles       []RoleTime `json:"roles"`
	GPUs        []GPUUse   `json:"gpus,omitempty"`
	Loop        LoopRates  `json:"loop"`
}

// RoleTime is one process's time: BusyShare is each phase's share of its wall time (from its
// own timers), IdleShare the share in which it kept no GPU busy (sampler: 1 − every phase;
// trainer: 1 − every phase but waiting, so waiting for a batch and the trainer's own overhead
// are idle). PerSecond are its counters' rates over the same span.
type RoleTime struct {
	Role        string             `json:"role"`
	Name        string             `json:"name"`
	WallSeconds float64            `json:"wall_s"`
	BusyShare   map[string]float64 `json:"busy_share,omitempty"`
	IdleShare   float64            `json:"idle_share"`
	PerSecond   map[string]float64 `json:"per_s,omitempty"`
}

// GPUUse is one GPU's nvidia-smi readings over the stage.
type GPUUse struct {
	Index       string  `json:"index"`
	Card        string  `json:"card,omitempty"`
	MeanUtil    float64 `json:"mean_util_pct"`
	MaxMemMiB   float64 `json:"max_mem_used_mib"`
	MemTotalMiB float64 `json:"mem_total_mib,omitempty"`
	Samples     int     `json:"samples"`
}

// LoopRates is the loop's throughput over the stage. Episodes, calls and generated tokens per
// second are the producer's (every policy call and episode, trained or not); TrainedShare is
// grpo.accounting's; SyncShare and CheckpointShare are the trainer's weight_sync and
// checkpoint shares of its wall time; staleness is at training time (steps.jsonl's
// staleness_mean averaged over the steps, staleness_max their maximum).
type LoopRates struct {
	EpisodesPerS    float64 `json:"episodes_per_s"`
	GenTokPerS      float64 `json:"gen_tok_per_s"`
	CallsPerS       float64 `json:"calls_per_s"`
	TrainedShare    float64 `json:"trained_share"`
	SyncShare       float64 `json:"sync_share"`
	CheckpointShare float64 `json:"checkpoint_share"`
	StalenessMean   float64 `json:"staleness_mean"`
	StalenessMax    float64 `json:"staleness_max"`
	// EpisodesInFlight and CallsInFlight are the mean episodes and policy calls in flight over
	// the stage (Little's law on the producer's episode and agent-call seconds);
	// OnSamplerShare = CallsInFlight / EpisodesInFlight is the share of an episode's time that
	// it has a call on a sampler (the rest: the user simulator, tools, grading, queueing in the
	// producer). The producers' concurrency rule (docs/OPERATIONS.md) divides the conversations
	// a sampler should hold by it.
	EpisodesInFlight float64 `json:"episodes_in_flight"`
	CallsInFlight    float64 `json:"calls_in_flight"`
	OnSamplerShare   float64 `json:"on_sampler_share"`
}

// Delta is what a cumulative counter grew by from prev to cur; a counter that went down was
// reset (its process restarted) and grew by cur since.
func Delta(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// Series are one source's samples in time order.
type Series struct {
	Role, Name string
	Samples    []TimelineSample
}

// SplitTimeline groups samples by source (role, then name, in a stable order: samplers, trainer,
// producer, GPUs), each in time order.
func SplitTimeline(samples []TimelineSample) []Series {
	by := map[[2]string]*Series{}
	var keys [][2]string
	for _, s := range samples {
		k := [2]string{s.Role, s.Name}
		if by[k] == nil {
			by[k] = &Series{Role: s.Role, Name: s.Name}
			keys = append(keys, k)
		}
		by[k].Samples = append(by[k].Samples, s)
	}
	order := map[string]int{RoleSampler: 0, RoleTrainer: 1, RoleProducer: 2, RoleGPU: 3}
	rank := func(role string) int {
		if r, ok := order[role]; ok {
			return r
		}
		return len(order)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if d := rank(a[0]) - rank(b[0]); d != 0 {
			return d
		}
		if d := strings.Compare(a[0], b[0]); d != 0 {
			return d
		}
		return strings.Compare(a[1], b[1])
	})
	out := make([]Series, 0, len(keys))
	for _, k := range keys {
		s := by[k]
		slices.SortStableFunc(s.Samples, func(a, b TimelineSample) int { return cmpFloat(a.T, b.T) })
		out = append(out, *s)
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// growth sums each key's growth over consecutive samples (Delta, so restarts count from 0).
func growth(ss []TimelineSample, get func(TimelineSample) map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for i := 1; i < len(ss); i++ {
		prev, cur := get(ss[i-1]), get(ss[i])
		for k, v := range cur {
			out[k] += Delta(prev[k], v)
		}
	}
	return out
}

// SummarizeTimeline computes GPUTime from the samples (Timeline and the loop's TrainedShare and
// staleness are the caller's). A source with fewer than two readings has no span and is left
// out of Roles.
func SummarizeTimeline(samples []TimelineSample) GPUTime {
	var g GPUTime
	if len(samples) == 0 {
		return g
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range samples {
		lo, hi = math.Min(lo, s.T), math.Max(hi, s.T)
	}
	g.WallSeconds = hi - lo
	for _, se := range SplitTimeline(samples) {
		ss := se.Samples
		if se.Role == RoleGPU {
			u := GPUUse{Index: se.Name}
			var sum float64
			for _, s := range ss {
				if s.Card != "" {
					u.Card = s.Card
				}
				u.MaxMemMiB = math.Max(u.MaxMemMiB, s.MemUsedMiB)
				u.MemTotalMiB = math.Max(u.MemTotalMiB, s.MemTotalMiB)
				if s.Util != nil {
					sum += *s.Util
					u.Samples++
				}
			}
			if u.Samples > 0 {
				u.MeanUtil = sum / float64(u.Samples)
			}
			g.GPUs = append(g.GPUs, u)
			continue
		}
		if len(ss) < 2 {
			continue
		}
		wall := ss[len(ss)-1].T - ss[0].T
		if wall <= 0 {
			continue
		}
		rt := RoleTime{Role: se.Role, Name: se.Name, WallSeconds: wall}
		busy := growth(ss, func(s TimelineSample) map[string]float64 { return s.Busy })
		counts := growth(ss, func(s TimelineSample) map[string]float64 { return s.Counts })
		if se.Role != RoleProducer {
			rt.BusyShare = map[string]float64{}
			used := 0.0
			for p, d := range busy {
				sh := share(d, wall)
				rt.BusyShare[p] = sh
				if !(se.Role == RoleTrainer && p == TrainerWaiting) {
					used += sh
				}
			}
			rt.IdleShare = math.Max(0, 1-used)
		}
		if len(counts) > 0 {
			rt.PerSecond = map[string]float64{}
			for k, d := range counts {
				rt.PerSecond[k] = d / wall
			}
		}
		switch se.Role {
		case RoleProducer:
			g.Loop.EpisodesPerS += rt.PerSecond[CountEpisodes]
			g.Loop.CallsPerS += rt.PerSecond[CountCalls]
			g.Loop.GenTokPerS += rt.PerSecond[CountGeneratedTokens]
			g.Loop.EpisodesInFlight += rt.PerSecond[CountEpisodeSeconds]
			g.Loop.CallsInFlight += rt.PerSecond[CountAgentSeconds]
		case RoleTrainer:
			g.Loop.SyncShare = rt.BusyShare["weight_sync"]
			g.Loop.CheckpointShare = rt.BusyShare["checkpoint"]
		}
		g.Roles = append(g.Roles, rt)
	}
	if g.Loop.EpisodesInFlight > 0 {
		g.Loop.OnSamplerShare = math.Min(1, g.Loop.CallsInFlight/g.Loop.EpisodesInFlight)
	}
	return g
}

// share is d/wall in [0, 1] (0 when undefined: a reading of absurd times or counters).
func share(d, wall float64) float64 {
	sh := d / wall
	if math.IsNaN(sh) || sh < 0 {
		return 0
	}
	return math.Min(sh, 1)
}

// IdleShare is the idle share of the roles' entries for role (their mean; 0 without one).
func (g GPUTime) IdleShare(role string) float64 {
	var s float64
	n := 0
	for _, r := range g.Roles {
		if r.Role == role {
			s += r.IdleShare
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return s / float64(n)
}
