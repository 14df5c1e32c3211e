package prefixtree

import "math/rand/v2"

// tau2Shape describes a synthetic τ²-shaped batch: groups of rollouts of one task, each rollout a
// chain of policy calls whose prompts re-render the conversation so far.
type tau2Shape struct {
	Groups, Rollouts, Calls int
	SystemTokens            int // system prompt + policy + tool schemas, shared by every call
	MaxContext              int // a rollout stops before a prompt+completion would exceed this
}

// tau2Batch builds one sequence per policy call (prompt ‖ completion, loss on the completion).
//
// The shape follows τ² under Qwen3's chat template: one system prompt for the whole batch; per task
// a greeting and a first user message shared by the group (the user simulator runs at temperature
// 0); then per rollout, policy completions (a <think> block + a reply or tool call), tool results
// and user replies. Qwen3's template drops the <think> block of assistant turns before the last
// user message, so a prompt extends the previous call's prompt ‖ completion exactly only between
// user messages; after a user message the re-rendered history branches off — the realistic case
// for per-call sequences.
func tau2Batch(r *rand.Rand, s tau2Shape) []Sequence {
	randToks := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(r.IntN(151643))
		}
		return out
	}
	span := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	type msg struct {
		user          bool
		think, answer []int32 // answer holds user/tool text for non-assistant turns
	}
	system := randToks(s.SystemTokens)
	var out []Sequence
	for g := 0; g < s.Groups; g++ {
		greeting := randToks(12)
		firstUser := randToks(span(40, 120))
		for ro := 0; ro < s.Rollouts; ro++ {
			hist := []msg{{answer: greeting}, {user: true, answer: firstUser}}
			for c := 0; c < s.Calls; c++ {
				lastUser := 0
				for i, m := range hist {
					if m.user {
						lastUser = i
					}
				}
				prompt := append([]int32(nil), system...)
				for i, m := range hist {
					if m.think != nil && i > lastUser {
						prompt = append(prompt, m.think...)
					}
					prompt = append(prompt, m.answer...)
				}
				think := randToks(span(60, 400))
				answer := randToks(span(20, 150))
				if len(prompt)+len(think)+len(answer) > s.MaxContext {
					break
				}
				toks := append(append(prompt, think...), answer...)
				loss := make([]bool, len(toks))
				for i := len(prompt); i < len(toks); i++ {
					loss[i] = true
				}
				out = append(out, Sequence{Tokens: toks, Loss: loss})
				hist = append(hist, msg{think: think, answer: answer})
				if r.IntN(3) == 0 {
					hist = append(hist, msg{user: true, answer: randToks(span(20, 120))})
				} else {
					hist = append(hist, msg{answer: randToks(span(40, 700))}) // tool result
				}
			}
		}
	}
	return out
}
