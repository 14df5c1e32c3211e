package localrun

import (
	"fmt"
	"strconv"
	"strings"

	"tau2rl/schemas/report"
	"tau2rl/schemas/steplog"
)

// The experiment's layout (issue 29): which devices each process of the GRPO stage sees. With
// gpus=1 (the default) nothing is placed: every sampler and the trainer run with the
// experiment's own environment and share device 0, exactly as tau2-run always ran them. With
// gpus > 1 each sampler runs alone on one device and the trainer on the rest, one
// data-parallel rank per device; each process sees only its own devices through
// CUDA_VISIBLE_DEVICES, so inside it they are ordinals 0 … n−1 (the trainer's parallel.devices
// are those ordinals, not the host's).
//
// Weights reach the samplers by the trainer's reload.mode, which the experiment leaves at its
// default (auto): CUDA IPC for a sampler that reports the trainer's GPU, a checkpoint on disk for
// the others; trainer_args=[reload.mode=distributed] puts samplers on other GPUs on the NCCL
// weight-sync group, which auto does not choose by itself until it has run on GPUs
// (docs/MULTIGPU.md). Any reload.mode works without a change here.

// sharedKVFraction is the KV-cache share (of the memory the weights leave) of the samplers on a
// GPU that the trainer shares, split evenly between them: 0.3 leaves the trainer room for the
// recipe's model (docs/LEARNING.md); a sampler alone on its GPU keeps tau2-sampler's own default
// (kv.memory_fraction 0.85), as the serving benchmark measures it.
const sharedKVFraction = 0.3

// placement is one process's devices.
type placement struct {
	// Devices is its CUDA_VISIBLE_DEVICES ("": the experiment's environment, unchanged).
	Devices string
	// Env is what the process gets added to its environment (nil when Devices is "").
	Env []string
}

// layout is where the GRPO stage's processes run.
type layout struct {
	// Name is perf.json's layout: "cpu" ("cpu-2sampler" with two samplers), "1gpu-shared"
	// ("1gpu-shared-2sampler" with several samplers on the one GPU), "4gpu-3sampler-1trainer".
	Name string
	// GPUs is how many devices the run uses (0 on the cpu backend).
	GPUs int
	// Samplers are the samplers' placements, in start order.
	Samplers []placement
	// SamplerArgs are each sampler's arguments before the configuration's sampler_args (which
	// therefore override them): its KV-cache share when it shares its GPU with the trainer.
	SamplerArgs [][]string
	// Trainer is the GRPO trainer's placement; TrainerArgs its data-parallel settings
	// (parallel.devices=[0,…,n−1] for n ≥ 2 ranks; none for one).
	Trainer     placement
	TrainerArgs []string
	// TrainerRanks is the trainer's data-parallel rank count (1: no data parallelism).
	TrainerRanks int
}

// layoutFor places cfg's processes. visible is the experiment's CUDA_VISIBLE_DEVICES ("" when
// unset): with it set, gpus counts from its first entry, so a run confined to devices 4-7 stays
// there.
func layoutFor(cfg ExperimentConfig, visible string) (layout, error) {
	gpus, samplers := max(cfg.GPUs, 1), max(cfg.Samplers, 1)
	l := layout{GPUs: gpus, TrainerRanks: 1}
	if cfg.Backend == "cpu" {
		l.GPUs = 0
	}
	if gpus == 1 {
		for range samplers {
			l.Samplers = append(l.Samplers, placement{})
			var args []string
			if cfg.Backend != "cpu" {
				args = []string{"kv.memory_fraction=" + strconv.FormatFloat(sharedKVFraction/float64(samplers), 'g', 3, 64)}
			}
			l.SamplerArgs = append(l.SamplerArgs, args)
		}
		switch {
		case cfg.Backend == "cpu" && samplers == 1:
			l.Name = "cpu"
		case cfg.Backend == "cpu":
			l.Name = fmt.Sprintf("cpu-%dsampler", samplers)
		case samplers == 1:
			l.Name = "1gpu-shared"
		default:
			l.Name = fmt.Sprintf("1gpu-shared-%dsampler", samplers)
		}
		return l, nil
	}
	devices := make([]string, gpus)
	for i := range devices {
		devices[i] = strconv.Itoa(i)
	}
	if visible = strings.TrimSpace(visible); visible != "" {
		have := strings.Split(visible, ",")
		if len(have) < gpus {
			return layout{}, fmt.Errorf("gpus %d: CUDA_VISIBLE_DEVICES=%s names only %d devices", gpus, visible, len(have))
		}
		for i := range devices {
			devices[i] = strings.TrimSpace(have[i])
		}
	}
	if samplers >= gpus {
		return layout{}, fmt.Errorf("samplers %d on gpus %d: the trainer needs at least one GPU of its own", samplers, gpus)
	}
	for i := range samplers {
		l.Samplers = append(l.Samplers, place(devices[i:i+1]))
		l.SamplerArgs = append(l.SamplerArgs, nil)
	}
	l.Trainer = place(devices[samplers:])
	l.TrainerRanks = gpus - samplers
	if l.TrainerRanks > 1 {
		ordinals := make([]string, l.TrainerRanks)
		for i := range ordinals {
			ordinals[i] = strconv.Itoa(i)
		}
		l.TrainerArgs = []string{"parallel.devices=[" + strings.Join(ordinals, ",") + "]"}
	}
	l.Name = fmt.Sprintf("%dgpu-%dsampler-%dtrainer", gpus, samplers, l.TrainerRanks)
	return l, nil
}

func place(devices []string) placement {
	d := strings.Join(devices, ",")
	return placement{Devices: d, Env: []string{"CUDA_VISIBLE_DEVICES=" + d}}
}

// samplerName is the i-th sampler's process name: "sampler" for the first (its log keeps the
// name it always had), "sampler-1", … for the others.
func samplerName(i int) string {
	if i == 0 {
		return "sampler"
	}
	return fmt.Sprintf("sampler-%d", i)
}

// endpoints is the list value of policy.endpoints and reload.endpoints: every address as a URL.
func endpoints(addrs []string) string {
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = "http://" + a
	}
	return "[" + strings.Join(urls, ",") + "]"
}

// samplerStats records, at the end of the GRPO loop, what each sampler served and the weights it
// holds (report.json's grpo.samplers), and says so when one of them is behind the trainer's last
// step: with several samplers every one must be reloaded after every step. A sampler that does
// not answer its /metrics is recorded with its name only and named in the run's output.
func (e *experiment) samplerStats(ckpt string) {
	steps := 0
	if recs, err := steplog.Read(ckpt); err == nil {
		steps = len(recs)
	}
	for i, q := range e.samplers {
		st := report.SamplerStats{Name: q.Name, Addr: e.policyAddrs[i], Devices: e.layout.Samplers[i].Devices}
		m, err := q.Scrape()
		if err != nil {
			e.printf("   %s: metrics not read (%v)", q.Name, err)
			e.rep.GRPO.Samplers = append(e.rep.GRPO.Samplers, st)
			continue
		}
		st.Calls = m["tau2rl_sampler_requests_total"]
		st.Reloads = m["tau2rl_sampler_weight_update_seconds_count"]
		st.WeightVersion = m["tau2rl_sampler_weight_version"]
		e.rep.GRPO.Samplers = append(e.rep.GRPO.Samplers, st)
		e.printf("   %s: %.0f calls served, %.0f weight updates, serves version %.0f", q.Name, st.Calls, st.Reloads, st.WeightVersion)
		if int(st.WeightVersion) < steps {
			e.printf("   %s serves version %.0f, behind the trainer's %d steps: its last reload failed or was cut off by grpo_time (see %s)",
				q.Name, st.WeightVersion, steps, q.LogPath)
		}
	}
}

// writeSamplers is report.md's line per sampler (with several: that each served and reloaded).
func writeSamplers(s *strings.Builder, ss []report.SamplerStats) {
	if len(ss) == 0 {
		return
	}
	fmt.Fprintf(s, "\n| sampler | devices | calls served | weight updates | version served at the end of GRPO |\n|---|---|---|---|---|\n")
	for _, st := range ss {
		dev := st.Devices
		if dev == "" {
			dev = "shared"
		}
		fmt.Fprintf(s, "| %s (%s) | %s | %.0f | %.0f | v%.0f |\n", st.Name, st.Addr, dev, st.Calls, st.Reloads, st.WeightVersion)
	}
}
