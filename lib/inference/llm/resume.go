package llm

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Generation is one completed token-mode policy call, possibly resumed
// across weight updates (GenerateResumable).
type Generation struct {
	// IDs are the generated ids, including the stop token as returned.
	IDs []int32
	// Logprobs has one sampler log-probability per id.
	Logprobs []float32
	// Versions has the policy version of each id.
	Versions []int64
	// Finish is FinishStop or FinishLength (an abort that used up the
	// budget counts as length).
	Finish string
	// Latency is the wall time of all the attempts' server calls.
	Latency time.Duration
}

// ResumeOptions configure GenerateResumable.
type ResumeOptions struct {
	// MaxResumes bounds how often an aborted generation is resumed. Default
	// 8 when ≤ 0.
	MaxResumes int
	// Version returns the caller's current policy version, used for tokens
	// whose server weight version is unknown or not a number; nil means 0.
	Version func() int64
}

// GenerateResumable runs one policy call, resuming it when the server
// aborts it for a weight update (AReaL's interruptible generation): the
// prompt is extended by the tokens generated so far and the remaining budget
// is asked for, so one completion may span several policy versions,
// recorded per token. It is the one copy of this loop: the τ² episode
// runner and the capture proxy both call it.
func GenerateResumable(ctx context.Context, p Policy, req GenerateRequest, opt ResumeOptions) (Generation, error) {
	var g Generation
	maxResumes := opt.MaxResumes
	if maxResumes <= 0 {
		maxResumes = 8
	}
	prompt, budget := req.InputIDs, req.MaxNewTokens
	for attempt := 0; ; attempt++ {
		req.MaxNewTokens = budget - len(g.IDs)
		res, err := p.Generate(ctx, req)
		if err != nil {
			return g, err
		}
		g.Latency += res.Latency
		g.IDs = append(g.IDs, res.OutputIDs...)
		g.Logprobs = append(g.Logprobs, res.Logprobs...)
		cur := int64(0)
		if opt.Version != nil {
			cur = opt.Version()
		}
		g.Versions = append(g.Versions, TokenVersions(res, cur)...)
		g.Finish = res.FinishReason
		if res.FinishReason != FinishAbort || len(g.IDs) >= budget {
			if g.Finish == FinishAbort {
				g.Finish = FinishLength
			}
			return g, nil
		}
		if attempt >= maxResumes {
			return g, fmt.Errorf("%w: generation aborted %d times (weight updates?)", ErrUnavailable, attempt+1)
		}
		if len(res.OutputIDs) == 0 {
			// Aborted before producing anything: give the update a moment.
			if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
				return g, err
			}
		}
		req.InputIDs = append(append(make([]int32, 0, len(prompt)+len(g.IDs)), prompt...), g.IDs...)
	}
}

// TokenVersions gives the policy version of each output token of res: the
// server's spans (or weight version) when numeric, else current.
func TokenVersions(res GenerateResult, current int64) []int64 {
	out := make([]int64, len(res.OutputIDs))
	fallback := current
	if v, err := strconv.ParseInt(res.WeightVersion, 10, 64); err == nil && v >= 0 {
		fallback = v
	}
	for i := range out {
		out[i] = fallback
	}
	for _, s := range res.VersionSpans {
		v, err := strconv.ParseInt(s.Version, 10, 64)
		if err != nil || v < 0 {
			v = current
		}
		for i := max(s.Start, 0); i < s.End && i < len(out); i++ {
			out[i] = v
		}
	}
	return out
}
