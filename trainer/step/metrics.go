package step

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the trainer's Prometheus metrics (namespace tau2rl_trainer).
type Metrics struct {
	Version          prometheus.Gauge
	Steps            prometheus.Counter
	StepSeconds      prometheus.Histogram
	PhaseSeconds     *prometheus.HistogramVec // phase: build, pack, prox, train, checkpoint, reload, publish
	BusySeconds      *prometheus.CounterVec   // phase: busy.go's BusyPhases
	TokensPerSecond  prometheus.Gauge         // original (unpacked) tokens per second of step time
	TreeTokenRatio   prometheus.Gauge
	PackedTokens     prometheus.Counter
	OriginalTokens   prometheus.Counter
	LossTokens       prometheus.Counter
	OversizeCalls    prometheus.Counter
	InvalidCalls     prometheus.Counter
	MicroBatches     prometheus.Gauge
	Loss             prometheus.Gauge
	GradNorm         prometheus.Gauge
	Entropy          prometheus.Gauge
	ClipFraction     prometheus.Gauge
	ApproxKL         prometheus.Gauge
	ImportanceWeight prometheus.Gauge
	BehavWeight      prometheus.Gauge
	BehavWeightMax   prometheus.Gauge
	BehavCapFraction prometheus.Gauge
	Advantage        prometheus.Gauge
	StalenessMax     prometheus.Gauge
	StalenessMean    prometheus.Gauge
	TokensAhead      prometheus.Counter
	Reward           *prometheus.GaugeVec   // domain: mean τ² reward of the trained episodes of the last step
	Episodes         *prometheus.CounterVec // domain: episodes trained
	Trajectories     *prometheus.CounterVec // verdict: accepted, duplicate, infra_error, not_evaluated, stale, resumed
	StaleDropped     prometheus.Counter
	Groups           *prometheus.CounterVec // outcome: ready, trained, filtered_<reason>, timeout_partial, timeout_dropped, too_few_trainable, pruned
	PendingGroups    prometheus.Gauge
	ReadyGroups      prometheus.Gauge
	Messages         prometheus.Counter
	EmptyMessages    prometheus.Counter
	Requests         prometheus.Counter
	LiveRequests     prometheus.Gauge
	ExpiredRequests  *prometheus.CounterVec // reason: stale, timeout
	Checkpoints      prometheus.Counter
	CommitErrors     prometheus.Counter
	ReloadErrors     prometheus.Counter
	PublishErrors    prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered, for tests).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns = "tau2rl_trainer"
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help})
	}
	m := &Metrics{
		Version:          g("policy_version", "Current policy version (optimizer steps taken)."),
		Steps:            c("steps_total", "Training steps completed."),
		StepSeconds:      prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "step_seconds", Help: "Wall time of a training step (build to optimizer step).", Buckets: prometheus.ExponentialBuckets(0.01, 2, 18)}),
		PhaseSeconds:     prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "phase_seconds", Help: "Wall time of each phase of a step.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 22)}, []string{"phase"}),
		BusySeconds:      newBusySeconds(),
		TokensPerSecond:  g("tokens_per_second", "Original (unpacked) tokens trained per second of step time in the last step."),
		TreeTokenRatio:   g("tree_token_ratio", "Packed tokens / original tokens of the last step (AReaL tree_token_ratio)."),
		PackedTokens:     c("packed_tokens_total", "Tokens computed after prefix-tree packing."),
		OriginalTokens:   c("original_tokens_total", "Tokens of the sequences before packing."),
		LossTokens:       c("loss_tokens_total", "Tokens that carried loss."),
		OversizeCalls:    c("oversize_calls_total", "Calls left out because prompt+completion exceeds max_tokens_per_mb."),
		InvalidCalls:     c("invalid_calls_total", "Calls left out because a trained token's behaviour log-prob is NaN, infinite or positive."),
		MicroBatches:     g("microbatches", "Micro-batches in the last step."),
		Loss:             g("loss", "Decoupled PPO loss of the last step (sum over minibatches)."),
		GradNorm:         g("grad_norm", "Pre-clip global gradient norm of the last optimizer step."),
		Entropy:          g("entropy", "Mean token entropy over loss tokens in the last step."),
		ClipFraction:     g("clip_fraction", "Fraction of loss tokens where the PPO clip was active."),
		ApproxKL:         g("approx_kl", "Mean logp − proximal logp over loss tokens."),
		ImportanceWeight: g("importance_weight", "Mean ratio π_θ/π_prox over loss tokens."),
		BehavWeight:      g("behave_imp_weight", "Mean proximal/behaviour importance weight (capped tokens count 0)."),
		BehavWeightMax:   g("behave_imp_weight_max", "Largest proximal/behaviour importance weight before the cap."),
		BehavCapFraction: g("behave_cap_fraction", "Fraction of loss tokens masked by behav_imp_weight_cap."),
		Advantage:        g("advantage_mean", "Mean advantage over loss tokens."),
		StalenessMax:     g("staleness_max", "Largest version lag of a loss token in the last step."),
		StalenessMean:    g("staleness_mean", "Mean version lag of loss tokens in the last step."),
		TokensAhead: c("tokens_ahead_of_trainer_total", "Loss tokens whose policy version is newer than the trainer's "+
			"(a server numbering its weights otherwise: misconfiguration); left out of the staleness."),
		Reward:          prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "reward", Help: "Mean τ² reward of the episodes trained in the last step, per domain."}, []string{"domain"}),
		Episodes:        prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "episodes_trained_total", Help: "Episodes trained on, per domain."}, []string{"domain"}),
		Trajectories:    prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "trajectories_total", Help: "Trajectories received, by what grouping did with them."}, []string{"verdict"}),
		StaleDropped:    c("stale_dropped_total", "Trajectories dropped for exceeding max_head_offpolicyness (on arrival or while waiting)."),
		Groups:          prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "groups_total", Help: "Groups by outcome."}, []string{"outcome"}),
		PendingGroups:   g("pending_groups", "Incomplete groups waiting for members."),
		ReadyGroups:     g("ready_groups", "Complete groups waiting for a step."),
		Messages:        c("messages_total", "Kafka messages consumed."),
		EmptyMessages:   c("empty_messages_total", "Messages without trajectories (dead-lettered or skipped)."),
		Requests:        c("rollout_requests_total", "Rollout requests published."),
		LiveRequests:    g("live_requests", "Rollout requests not yet finished (admission)."),
		ExpiredRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "expired_requests_total", Help: "Rollout requests expired by admission."}, []string{"reason"}),
		Checkpoints:     c("checkpoints_total", "Checkpoints written."),
		CommitErrors:    c("commit_errors_total", "Failed offset commits (retried at the next checkpoint)."),
		ReloadErrors:    c("reload_errors_total", "Failed inference-server weight reloads."),
		PublishErrors:   c("publish_errors_total", "Failed policy-version publications."),
	}
	if reg == nil {
		return m, nil
	}
	for _, col := range []prometheus.Collector{m.Version, m.Steps, m.StepSeconds, m.PhaseSeconds, m.BusySeconds, m.TokensPerSecond, m.TreeTokenRatio,
		m.PackedTokens, m.OriginalTokens, m.LossTokens, m.OversizeCalls, m.InvalidCalls, m.MicroBatches, m.Loss, m.GradNorm, m.Entropy, m.ClipFraction, m.ApproxKL,
		m.ImportanceWeight, m.BehavWeight, m.BehavWeightMax, m.BehavCapFraction, m.Advantage, m.StalenessMax, m.StalenessMean, m.TokensAhead,
		m.Reward, m.Episodes, m.Trajectories, m.StaleDropped, m.Groups, m.PendingGroups, m.ReadyGroups, m.Messages, m.EmptyMessages,
		m.Requests, m.LiveRequests, m.ExpiredRequests, m.Checkpoints, m.CommitErrors, m.ReloadErrors, m.PublishErrors} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}
